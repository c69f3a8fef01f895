//! Fails when mongoelector-sys's src/lib.rs drifts from mongoelector.h: a function,
//! parameter or return type, callback type, struct field, enum value or version macro
//! differs from bindgen's translation, or a struct's size, alignment or field offset
//! differs from clang's. The header: MONGOELECTOR_INCLUDE_DIR/mongoelector.h if set, else
//! capi/include/mongoelector.h of this checkout. Needs libclang (LIBCLANG_PATH if not found).
use mongoelector_header_drift::{
    bindgen_source, diff, diff_layout, header_model, rust_model, Layout, Model,
};

// The declarations under test, compiled here as a module (nothing is linked).
#[allow(dead_code, non_upper_case_globals, clippy::all)]
#[path = "../../mongoelector-sys/src/lib.rs"]
mod sys;

mod ours {
    include!(concat!(env!("OUT_DIR"), "/layout_ours.rs"));
}

const RUST_DECLS: &str = include_str!("../../mongoelector-sys/src/lib.rs");

fn header_path() -> std::path::PathBuf {
    let p = match std::env::var_os("MONGOELECTOR_INCLUDE_DIR") {
        Some(d) => std::path::PathBuf::from(d).join("mongoelector.h"),
        None => {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include/mongoelector.h")
        }
    };
    p.canonicalize().unwrap_or(p)
}

fn header_text() -> String {
    let p = header_path();
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

fn translate(header: &str) -> (Model, Layout) {
    let rs = bindgen_source(header).unwrap_or_else(|e| panic!("{e}"));
    header_model(&rs).unwrap_or_else(|e| panic!("{e}\n{rs}"))
}

fn ours_model() -> Model {
    rust_model(RUST_DECLS).unwrap_or_else(|e| panic!("{e}"))
}

fn ours_layout() -> Layout {
    ours::rust_layout()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}

#[test]
fn declarations_match_the_header() {
    let (header, _) = translate(&header_text());
    // bindgen saw every API function: each line starting MONGOELECTOR_API declares one,
    // whose name precedes the first '('.
    let scanned: std::collections::BTreeSet<String> = header_text()
        .lines()
        .filter(|l| l.starts_with("MONGOELECTOR_API "))
        .map(|l| {
            let name = l[..l.find('(').expect("API line without (")]
                .rsplit([' ', '*'])
                .next();
            format!("fn {}", name.unwrap())
        })
        .collect();
    let translated: std::collections::BTreeSet<String> = header
        .keys()
        .filter(|k| k.starts_with("fn "))
        .cloned()
        .collect();
    assert_eq!(
        translated, scanned,
        "bindgen's functions vs the MONGOELECTOR_API lines"
    );

    let diffs = diff(&header, &ours_model());
    assert!(
        diffs.is_empty(),
        "mongoelector-sys/src/lib.rs differs from {} ({} differences):\n  {}",
        header_path().display(),
        diffs.len(),
        diffs.join("\n  ")
    );
}

#[test]
fn struct_layouts_match_clang() {
    let (_, clang) = translate(&header_text());
    assert!(!clang.is_empty(), "bindgen produced no layout tests");
    let diffs = diff_layout(&clang, &ours_layout());
    assert!(
        diffs.is_empty(),
        "struct layouts of mongoelector-sys/src/lib.rs differ from clang's for {}:\n  {}",
        header_path().display(),
        diffs.join("\n  ")
    );
}

// The check itself must see each kind of drift.

/// Replaces `from` (which must occur) by `to` in the header and asserts that comparing
/// bindgen's translation with src/lib.rs reports every one of `needles`.
fn assert_caught(what: &str, from: &str, to: &str, needles: &[&str]) {
    let header = header_text();
    assert!(
        header.contains(from),
        "{what}: {from:?} is not in the header any more"
    );
    let (model, clang) = translate(&header.replace(from, to));
    let mut diffs = diff(&model, &ours_model());
    diffs.extend(diff_layout(&clang, &ours_layout()));
    for needle in needles {
        assert!(
            diffs.iter().any(|d| d.contains(needle)),
            "{what} was not detected ({needle}); differences: {diffs:#?}"
        );
    }
}

#[test]
fn detects_a_renamed_function() {
    assert_caught(
        "a renamed function",
        "mongoelector_locker_touch(",
        "mongoelector_locker_renew(",
        &[
            "fn mongoelector_locker_renew: missing",
            "fn mongoelector_locker_touch: not in the header",
        ],
    );
}

#[test]
fn detects_an_added_parameter() {
    assert_caught(
        "an added parameter",
        "mongoelector_locker_release(mongoelector_locker *locker,",
        "mongoelector_locker_release(mongoelector_locker *locker, double grace,",
        &["fn mongoelector_locker_release:"],
    );
}

#[test]
fn detects_a_changed_parameter_or_return_type() {
    assert_caught(
        "a changed parameter type",
        "int64_t *fence_out",
        "int32_t *fence_out",
        &["fn mongoelector_locker_acquire:"],
    );
    assert_caught(
        "a changed return type",
        "MONGOELECTOR_API int mongoelector_version_number(void);",
        "MONGOELECTOR_API long mongoelector_version_number(void);",
        &["fn mongoelector_version_number:"],
    );
}

#[test]
fn detects_a_changed_struct() {
    assert_caught(
        "a changed field type",
        "  int64_t fence;  ",
        "  int32_t fence;  ",
        &["struct mongoelector_lock_info:"],
    );
    assert_caught(
        "a field inserted in the middle",
        "  int64_t pid;",
        "  int64_t pid;\n  int64_t ppid;",
        &[
            "struct mongoelector_lock_info:",
            "Offset of field: mongoelector_lock_info::created_ms: 336 in C, 328 in src/lib.rs",
            "Size of mongoelector_lock_info: 360 in C, 352 in src/lib.rs",
        ],
    );
    assert_caught(
        "an added field",
        "  int allow_unsafe_server;                 /*",
        "  int allow_unsafe_server;\n  int new_field; /*",
        &[
            "struct mongoelector_elector_options:",
            "mongoelector_elector_options::new_field",
        ],
    );
    assert_caught(
        "a changed field of the lease options",
        "  double step_seconds;              /* default 0.25",
        "  float step_seconds;              /* default 0.25",
        &["struct mongoelector_lease_options:"],
    );
    assert_caught(
        "a changed field of a 1.1 struct",
        "  size_t label_count;",
        "  uint32_t label_count;",
        &["struct mongoelector_error_info:"],
    );
    assert_caught(
        "a field appended to a 1.1 config",
        "  double op_timeout_seconds;               /* as in mongoelector_locker_config */",
        "  double op_timeout_seconds;\n  int new_field;",
        &[
            "struct mongoelector_elector_config:",
            "Size of mongoelector_elector_config",
        ],
    );
    assert_caught(
        "a field of the log record inserted before fence",
        "  int64_t fence;     /* the hold's fencing token",
        "  int32_t event2;\n  int64_t fence;     /* the hold's fencing token",
        &[
            "struct mongoelector_log_record:",
            "mongoelector_log_record::event2",
        ],
    );
    assert_caught(
        "a changed stats histogram size",
        "#define MONGOELECTOR_STATS_LATENCY_BUCKETS 15",
        "#define MONGOELECTOR_STATS_LATENCY_BUCKETS 16",
        &[
            "const MONGOELECTOR_STATS_LATENCY_BUCKETS:",
            "struct mongoelector_stats:",
            "Size of mongoelector_stats",
        ],
    );
    assert_caught(
        "a changed array size",
        "char uuid[64];",
        "char uuid[37];",
        &[
            "struct mongoelector_lock_info:",
            "Offset of field: mongoelector_lock_info::host",
        ],
    );
}

#[test]
fn detects_changed_constants_and_callbacks() {
    assert_caught(
        "a changed enum value",
        "MONGOELECTOR_ERR_INTERNAL = 100",
        "MONGOELECTOR_ERR_INTERNAL = 99",
        &["const MONGOELECTOR_ERR_INTERNAL:"],
    );
    assert_caught(
        "a changed callback type",
        "typedef void (*mongoelector_callback_fn)(void *user_data);",
        "typedef void (*mongoelector_callback_fn)(void *user_data, int event);",
        &["type mongoelector_callback_fn:"],
    );
    assert_caught(
        "a changed lease callback type",
        "typedef void (*mongoelector_lease_lost_fn)(void *user_data);",
        "typedef int (*mongoelector_lease_lost_fn)(void *user_data);",
        &["type mongoelector_lease_lost_fn:"],
    );
    assert_caught(
        "a changed version macro",
        "#define MONGOELECTOR_VERSION_MINOR 1",
        "#define MONGOELECTOR_VERSION_MINOR 2",
        &[
            "const MONGOELECTOR_VERSION_MINOR:",
            "const MONGOELECTOR_VERSION_NUMBER:",
        ],
    );
    assert_caught(
        "a new enumerator",
        "  MONGOELECTOR_ERR_INTERNAL = 100",
        "  MONGOELECTOR_ERR_BUSY = 9,\n  MONGOELECTOR_ERR_INTERNAL = 100",
        &["const MONGOELECTOR_ERR_BUSY: missing"],
    );
}
