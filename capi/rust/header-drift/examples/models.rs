//! Prints both normalised models and clang's layout, for looking at a drift report:
//!   cargo run -p mongoelector-header-drift --example models [path/to/mongoelector.h]
use mongoelector_header_drift::{bindgen_source, header_model, rust_model};

fn main() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let header = std::env::args()
        .nth(1)
        .unwrap_or_else(|| format!("{dir}/../../include/mongoelector.h"));
    let text = std::fs::read_to_string(&header).expect("read the header");
    let (h, layout) = header_model(&bindgen_source(&text).unwrap()).unwrap();
    let lib = std::fs::read_to_string(format!("{dir}/../mongoelector-sys/src/lib.rs")).unwrap();
    let ours = rust_model(&lib).unwrap();
    for (name, desc) in &h {
        let mark = if ours.get(name) == Some(desc) {
            "  "
        } else {
            "!="
        };
        println!("{mark} {name}: {desc}");
    }
    for name in ours.keys().filter(|k| !h.contains_key(*k)) {
        println!("+  {name}: {} (src/lib.rs only)", ours[name]);
    }
    for (label, n) in &layout {
        println!("   {label}: {n}");
    }
}
