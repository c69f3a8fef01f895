// Adds an rpath to libmongoelector's directory (found by mongoelector-sys, see its
// build.rs) to this crate's own tests and examples, so `cargo test` runs without
// LD_LIBRARY_PATH. Crates depending on this one are not touched.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MONGOELECTOR_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_MONGOELECTOR_LIB_DIR") {
        // Applies to what this package links itself (tests, examples), not to dependents.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
