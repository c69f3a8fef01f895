// Links libmongoelector and generates the layout check of tests/header_drift.rs.
//
// Where the library is found, first match wins:
//   MONGOELECTOR_LIB_DIR=/dir     directory holding libmongoelector.so (a build tree's
//                                 capi/ or an install prefix's lib/)
//   pkg-config mongoelector       (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig)
//   the linker's default paths    (a system install)
// At run time the loader must find it too: LD_LIBRARY_PATH, or an rpath (the safe
// crate's build.rs adds one to its own tests and examples).
//
// The header (for the drift test only) comes from MONGOELECTOR_INCLUDE_DIR, default
// ../../include (this checkout).
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "drift/header_model.rs"]
mod header_model;

fn main() {
    println!("cargo:rerun-if-env-changed=MONGOELECTOR_LIB_DIR");
    println!("cargo:rerun-if-env-changed=MONGOELECTOR_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=drift/header_model.rs");

    if let Some(dir) = lib_dir() {
        println!("cargo:rustc-link-search=native={}", dir.display());
        // Dependents' build scripts read it as DEP_MONGOELECTOR_LIB_DIR.
        println!("cargo:lib_dir={}", dir.display());
        // This package's own tests run without LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=mongoelector");

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let include = env::var_os("MONGOELECTOR_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../../include"));
    let header = include.join("mongoelector.h");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    generate_layout_check(&header, &include, &out);
}

fn lib_dir() -> Option<PathBuf> {
    if let Some(d) = env::var_os("MONGOELECTOR_LIB_DIR") {
        return Some(PathBuf::from(d));
    }
    let out = Command::new("pkg-config")
        .args(["--libs-only-L", "mongoelector"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|f| f.strip_prefix("-L").map(PathBuf::from))
}

// From the header's structs: a C table of sizeof/offsetof (compiled here, linked into
// this package's tests only) and the same table computed by Rust (offset_of!). A field
// missing on the Rust side is then a compile error of the test, a moved one a failure.
fn generate_layout_check(header: &Path, include: &Path, out: &Path) {
    println!("cargo:rerun-if-changed={}", header.display());
    println!(
        "cargo:rustc-env=MONGOELECTOR_SYS_HEADER={}",
        header.display()
    );
    let text = match fs::read_to_string(header) {
        Ok(t) => t,
        Err(e) => {
            // The drift test reports it; the library itself does not need the header.
            println!(
                "cargo:warning=mongoelector.h not found at {}: {e}",
                header.display()
            );
            fs::write(
                out.join("layout_rust.rs"),
                "pub fn rust_layout() -> Vec<(String, String, usize)> { vec![] }\n",
            )
            .unwrap();
            return;
        }
    };
    let model = match header_model::parse_c(&text) {
        Ok(m) => m,
        Err(e) => panic!("cannot parse {}: {e}", header.display()),
    };
    let mut c = String::from(
        "#include <stddef.h>\n#include \"mongoelector.h\"\n\
         typedef struct { const char *type; const char *field; size_t value; } me_sys_layout_entry;\n\
         static const me_sys_layout_entry entries[] = {\n",
    );
    let mut r = String::from(
        "#[allow(unused_imports)] use mongoelector_sys::*;\n\
         pub fn rust_layout() -> Vec<(String, String, usize)> {\n    vec![\n",
    );
    for name in model.enums.keys().chain(model.structs.keys()) {
        c += &format!("  {{\"{name}\", \"\", sizeof({name})}},\n");
        r += &format!(
            "        (\"{name}\".into(), String::new(), std::mem::size_of::<{name}>()),\n"
        );
    }
    for (name, fields) in &model.structs {
        for (f, _) in fields {
            c += &format!("  {{\"{name}\", \"{f}\", offsetof({name}, {f})}},\n");
            r += &format!(
                "        (\"{name}\".into(), \"{f}\".into(), std::mem::offset_of!({name}, {f})),\n"
            );
        }
    }
    c += "};\nconst me_sys_layout_entry *mongoelector_sys_layout(size_t *n) {\n\
          *n = sizeof entries / sizeof entries[0];\n  return entries;\n}\n";
    r += "    ]\n}\n";
    let c_path = out.join("layout.c");
    fs::write(&c_path, c).unwrap();
    fs::write(out.join("layout_rust.rs"), r).unwrap();
    let objects = cc::Build::new()
        .file(&c_path)
        .include(include)
        .cargo_metadata(false)
        .warnings(true)
        .compile_intermediates();
    for o in objects {
        println!("cargo:rustc-link-arg-tests={}", o.display());
    }
}
