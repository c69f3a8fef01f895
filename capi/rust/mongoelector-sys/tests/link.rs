//! The crate links the library it found (build.rs) and agrees with its version. The
//! declarations themselves are checked against the header by the workspace's
//! header-drift crate (bindgen).
use std::ffi::CStr;

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
