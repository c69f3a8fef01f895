//! The crate links the library it found (build.rs) and agrees with its version. The
//! declarations themselves are generated from the header (regenerate.sh --check).
use std::ffi::CStr;

#[test]
fn links_and_reports_the_header_version() {
    let v = unsafe { CStr::from_ptr(mongoelector_sys::mongoelector_version()) };
    let header = CStr::from_bytes_with_nul(mongoelector_sys::MONGOELECTOR_VERSION_STRING).unwrap();
    assert_eq!(v, header);
    assert_eq!(
        unsafe { mongoelector_sys::mongoelector_version_number() } as u32,
        mongoelector_sys::MONGOELECTOR_VERSION_NUMBER
    );
}
