//! Fails when src/lib.rs drifts from capi/include/mongoelector.h: function names,
//! parameter and return types, callback types, struct fields, sizes and offsets (measured
//! by the C compiler), enum values and version macros.

#[path = "../drift/header_model.rs"]
mod header_model;

mod layout {
    include!(concat!(env!("OUT_DIR"), "/layout_rust.rs"));
}

use header_model::{compare, parse_c, parse_rust};
use std::ffi::CStr;
use std::os::raw::c_char;

const HEADER: &str = env!("MONGOELECTOR_SYS_HEADER");
const RUST_DECLS: &str = include_str!("../src/lib.rs");

fn header_text() -> String {
    std::fs::read_to_string(HEADER)
        .unwrap_or_else(|e| panic!("cannot read {HEADER} (set MONGOELECTOR_INCLUDE_DIR): {e}"))
}

#[test]
fn declarations_match_the_header() {
    let c = parse_c(&header_text()).expect("parse header");
    let r = parse_rust(RUST_DECLS).expect("parse src/lib.rs");
    // Cross-check the parser with a dumb scan: every line starting MONGOELECTOR_API
    // declares one function, whose name precedes the first '('.
    let scanned: std::collections::BTreeSet<String> = header_text()
        .lines()
        .filter(|l| l.starts_with("MONGOELECTOR_API "))
        .map(|l| {
            l[..l.find('(').expect("API line without (")]
                .rsplit([' ', '*'])
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    let parsed: std::collections::BTreeSet<String> = c.funcs.keys().cloned().collect();
    assert_eq!(
        parsed, scanned,
        "the header parser missed or invented API functions"
    );
    let diffs = compare(&c, &r);
    assert!(
        diffs.is_empty(),
        "src/lib.rs differs from {HEADER}:\n  {}",
        diffs.join("\n  ")
    );
}

#[repr(C)]
struct Entry {
    ty: *const c_char,
    field: *const c_char,
    value: usize,
}
extern "C" {
    fn mongoelector_sys_layout(n: *mut usize) -> *const Entry;
}

#[test]
fn struct_layouts_match_the_c_compiler() {
    let mut n = 0usize;
    let entries = unsafe { std::slice::from_raw_parts(mongoelector_sys_layout(&mut n), n) };
    let c: Vec<(String, String, usize)> = entries
        .iter()
        .map(|e| unsafe {
            (
                CStr::from_ptr(e.ty).to_string_lossy().into_owned(),
                CStr::from_ptr(e.field).to_string_lossy().into_owned(),
                e.value,
            )
        })
        .collect();
    let rust = layout::rust_layout();
    assert!(!c.is_empty(), "no layout entries generated from the header");
    assert_eq!(
        c, rust,
        "(type, field or \"\" for sizeof, offset/size): C vs Rust"
    );
}

// The checker itself must see each kind of drift the task names.

/// Replaces `from` (which must occur) by `to` in the header and asserts that the
/// comparison with src/lib.rs reports every one of `needles`.
fn assert_caught(what: &str, from: &str, to: &str, needles: &[&str]) {
    let header = header_text();
    assert!(
        header.contains(from),
        "{what}: {from:?} is not in the header any more"
    );
    let c = parse_c(&header.replace(from, to)).expect("parse edited header");
    let r = parse_rust(RUST_DECLS).unwrap();
    let diffs = compare(&c, &r);
    for needle in needles {
        assert!(
            diffs.iter().any(|d| d.contains(needle)),
            "{what} was not detected ({needle}); differences: {diffs:?}"
        );
    }
}

#[test]
fn detects_a_renamed_function() {
    assert_caught(
        "a renamed function",
        "mongoelector_locker_touch(",
        "mongoelector_locker_renew(",
        &["mongoelector_locker_renew", "mongoelector_locker_touch"],
    );
}

#[test]
fn detects_an_added_parameter() {
    assert_caught(
        "an added parameter",
        "mongoelector_locker_release(mongoelector_locker *locker,",
        "mongoelector_locker_release(mongoelector_locker *locker, double grace,",
        &["mongoelector_locker_release"],
    );
}

#[test]
fn detects_a_changed_parameter_type() {
    assert_caught(
        "a changed parameter type",
        "int64_t *fence_out",
        "int32_t *fence_out",
        &["mongoelector_locker_acquire"],
    );
}

#[test]
fn detects_a_changed_struct() {
    assert_caught(
        "a changed field type",
        "  int64_t fence;  ",
        "  int32_t fence;  ",
        &["mongoelector_lock_info"],
    );
    assert_caught(
        "an added field",
        // (only the declaration: its comment may change)
        "  int allow_unsafe_server;                 /*",
        "  int allow_unsafe_server;\n  int new_field; /*",
        &["mongoelector_elector_options"],
    );
    assert_caught(
        "a changed field of the lease options",
        "  double step_seconds;              /* default 0.25",
        "  float step_seconds;              /* default 0.25",
        &["mongoelector_lease_options"],
    );
    assert_caught(
        "a changed lease callback type",
        "typedef void (*mongoelector_lease_lost_fn)(void *user_data);",
        "typedef int (*mongoelector_lease_lost_fn)(void *user_data);",
        &["mongoelector_lease_lost_fn"],
    );
    assert_caught(
        "a changed array size",
        "char uuid[64];",
        "char uuid[37];",
        &["mongoelector_lock_info"],
    );
}

#[test]
fn detects_changed_constants_and_callbacks() {
    assert_caught(
        "a changed enum value",
        "MONGOELECTOR_ERR_INTERNAL = 100",
        "MONGOELECTOR_ERR_INTERNAL = 99",
        &["MONGOELECTOR_ERR_INTERNAL"],
    );
    assert_caught(
        "a changed callback type",
        "typedef void (*mongoelector_callback_fn)(void *user_data);",
        "typedef void (*mongoelector_callback_fn)(void *user_data, int event);",
        &["mongoelector_callback_fn"],
    );
    assert_caught(
        "a changed version macro",
        "#define MONGOELECTOR_VERSION_MINOR 0",
        "#define MONGOELECTOR_VERSION_MINOR 1",
        &["MONGOELECTOR_VERSION_NUMBER"],
    );
}

#[test]
fn links_and_reports_the_header_version() {
    let v = unsafe { CStr::from_ptr(mongoelector_sys::mongoelector_version()) };
    assert_eq!(
        v.to_str().unwrap(),
        mongoelector_sys::MONGOELECTOR_VERSION_STRING
    );
    assert_eq!(
        unsafe { mongoelector_sys::mongoelector_version_number() },
        mongoelector_sys::MONGOELECTOR_VERSION_NUMBER
    );
}
