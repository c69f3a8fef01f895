//! The README shows examples/readme.rs verbatim (the example is compiled by `cargo test`;
//! the README's other Rust blocks are doc-tests).
#[test]
fn readme_shows_the_compiled_example() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{dir}/README.md")).unwrap();
    let example = std::fs::read_to_string(format!("{dir}/examples/readme.rs")).unwrap();
    let block = format!("```rust,no_run\n{example}```\n");
    assert!(
        readme.contains(&block),
        "README.md does not show examples/readme.rs verbatim: copy the example into its \
         first rust block"
    );
}
