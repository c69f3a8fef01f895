// Generates OUT_DIR/layout_ours.rs: sizes, alignments and field offsets of the structs
// of mongoelector-sys's src/lib.rs as the Rust compiler lays them out, labelled like
// bindgen's layout tests, for tests/drift.rs to compare with clang's.
#![allow(dead_code)]
#[path = "src/rust_layout.rs"]
mod rust_layout;

fn main() {
    let lib_rs = "../mongoelector-sys/src/lib.rs";
    println!("cargo:rerun-if-changed={lib_rs}");
    println!("cargo:rerun-if-changed=src/rust_layout.rs");
    let text = std::fs::read_to_string(lib_rs).expect("read mongoelector-sys/src/lib.rs");
    let code = rust_layout::layout_code(&text, "crate::sys").unwrap_or_else(|e| panic!("{e}"));
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("layout_ours.rs"), code).unwrap();
}
