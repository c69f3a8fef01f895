// Links libmongoelector (the C library is not built by this crate: install it first).
//
// Where the library is found, first match wins:
//   MONGOELECTOR_LIB_DIR=/dir   the directory holding libmongoelector.so (a build tree's
//                               capi/ or a prefix's lib/); overrides pkg-config
//   pkg-config mongoelector     an installed library, >= 1.1.0 (PKG_CONFIG_PATH=
//                               <prefix>/lib/pkgconfig unless the prefix is a system one)
// Neither finds it: the build fails with a message naming both.
//
// At run time the loader must find the library too: a system prefix is found, any
// other needs LD_LIBRARY_PATH (this crate's own tests, and the safe crate's tests and
// examples, get an rpath to the directory found here; dependents do not).
//
// Metadata for dependents' build scripts (`links = "mongoelector"`):
// DEP_MONGOELECTOR_LIB_DIR (when a directory was found) and DEP_MONGOELECTOR_INCLUDE
// (pkg-config's include directories, ':'-separated, when pkg-config found it).
use std::env;
use std::path::PathBuf;
use std::process::exit;

const MIN_VERSION: &str = "1.1.0";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MONGOELECTOR_LIB_DIR");
    // docs.rs builds documentation only (nothing is linked) and has no libmongoelector.
    if env::var_os("DOCS_RS").is_some() {
        return;
    }

    let dir = match env::var_os("MONGOELECTOR_LIB_DIR").filter(|d| !d.is_empty()) {
        Some(d) => Some(from_lib_dir(PathBuf::from(d))),
        None => from_pkg_config(),
    };
    if let Some(dir) = dir {
        println!("cargo:lib_dir={}", dir.display());
        // This package's own tests run without LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", dir.display());
    }
}

fn from_lib_dir(dir: PathBuf) -> PathBuf {
    let has_lib = std::fs::read_dir(&dir)
        .map(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("libmongoelector.") || name == "mongoelector.lib"
            })
        })
        .unwrap_or(false);
    if !has_lib {
        fail(&format!(
            "MONGOELECTOR_LIB_DIR={} holds no libmongoelector.so (it must name the \
             directory of the library: a build tree's capi/ or an install prefix's lib/).",
            dir.display()
        ));
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=mongoelector");
    dir
}

// Emits the link flags itself (and rerun-if-env-changed for PKG_CONFIG_PATH & co).
fn from_pkg_config() -> Option<PathBuf> {
    match pkg_config::Config::new()
        .atleast_version(MIN_VERSION)
        .probe("mongoelector")
    {
        Ok(lib) => {
            let include = env::join_paths(&lib.include_paths).unwrap_or_default();
            println!("cargo:include={}", include.to_string_lossy());
            // Empty when the library is in a system directory (pkg-config omits -L).
            lib.link_paths.first().cloned()
        }
        Err(e) => fail(&format!(
            "MONGOELECTOR_LIB_DIR is not set, and pkg-config did not find mongoelector >= \
             {MIN_VERSION}:\n\n{}\n",
            indent(e.to_string().trim())
        )),
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn fail(why: &str) -> ! {
    eprintln!(
        "\nerror: mongoelector-sys cannot find the C library libmongoelector.\n\n\
         {why}\n\
         Install it (cmake --install <build dir> --prefix <prefix>), then build with either\n\
         \x20   PKG_CONFIG_PATH=<prefix>/lib/pkgconfig     (found by `pkg-config mongoelector`)\n\
         or\n\
         \x20   MONGOELECTOR_LIB_DIR=<directory holding libmongoelector.so>\n\
         and at run time LD_LIBRARY_PATH=<that directory> unless it is a system one.\n\
         (https://docs.rs/mongoelector-sys, \"Linking\")\n"
    );
    exit(1);
}
