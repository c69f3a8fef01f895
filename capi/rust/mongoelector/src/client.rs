use crate::error::{check, cstring, Result};
use mongoelector_sys as sys;
use std::ffi::CStr;
use std::ptr;
use std::sync::{Arc, Mutex};

pub(crate) struct ClientInner {
    pub(crate) ptr: *mut sys::mongoelector_client,
    // mongoelector_client_server_info is not concurrent with itself on one client.
    info: Mutex<()>,
}

// The C client "may be shared by threads"; server_info is serialised by `info`.
unsafe impl Send for ClientInner {}
unsafe impl Sync for ClientInner {}

impl Drop for ClientInner {
    fn drop(&mut self) {
        // Lockers and electors hold an Arc to this: it runs after the last of them, as
        // the C API requires.
        unsafe { sys::mongoelector_client_free(self.ptr) }
    }
}

/// A lazy connection to a server and one database. Cheap to clone; lockers and electors
/// made from it keep it alive. Make one per deployment and process: every `Locker` and
/// `Elector` made from it (or its clones) shares its connection pool (at most
/// `maxPoolSize` connections, default 10, plus one monitor per server; lockers of one
/// ttl share one pool), so a thousand keys cost a few connections and no thread each.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

impl Client {
    /// Connects lazily to `uri` ("mongodb://host:port/?options") and uses `database`.
    /// Nothing is sent until first use; a malformed URI is `Error::InvalidArgument`.
    /// The first call routes the library's log messages to the `log` crate (see
    /// [`crate::set_log_handler`]).
    pub fn new(uri: &str, database: &str) -> Result<Client> {
        crate::log::install()?;
        let curi = cstring("uri", uri)?;
        let cdb = cstring("database", database)?;
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::mongoelector_client_new(curi.as_ptr(), cdb.as_ptr(), &mut ptr) })?;
        Ok(Client {
            inner: Arc::new(ClientInner {
                ptr,
                info: Mutex::new(()),
            }),
        })
    }

    /// The server's name ("MongoDB", "FerretDB", "mongo-java-server") and version. One
    /// round trip.
    pub fn server_info(&self) -> Result<(String, String)> {
        let _g = self.inner.info.lock().unwrap_or_else(|e| e.into_inner());
        let mut name = ptr::null();
        let mut version = ptr::null();
        check(unsafe {
            sys::mongoelector_client_server_info(self.inner.ptr, &mut name, &mut version)
        })?;
        // The strings belong to the client until the next call: copy them under the lock.
        unsafe {
            Ok((
                CStr::from_ptr(name).to_string_lossy().into_owned(),
                CStr::from_ptr(version).to_string_lossy().into_owned(),
            ))
        }
    }
}
