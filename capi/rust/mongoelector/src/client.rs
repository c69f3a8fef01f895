use crate::error::{check, cstring, Result};
use crate::locker::take_c_string;
use mongoelector_sys as sys;
use std::os::raw::c_char;
use std::ptr;
use std::sync::Arc;

pub(crate) struct ClientInner {
    pub(crate) ptr: *mut sys::mongoelector_client,
}

// The C client "may be shared by threads"; server_info_copy is concurrent-safe.
unsafe impl Send for ClientInner {}
unsafe impl Sync for ClientInner {}

impl Drop for ClientInner {
    fn drop(&mut self) {
        // Lockers and electors hold an Arc to this: it runs after the last of them (the C
        // API would allow either order).
        unsafe { sys::mongoelector_client_free(self.ptr) }
    }
}

/// A lazy connection to a server and one database. Cheap to clone; lockers and electors
/// made from it keep it alive. Make one per deployment and process: every `Locker` and
/// `Elector` made from it (or its clones) shares its connection pool (at most
/// `maxPoolSize` connections, default 10, plus one monitor per server; lockers of one
/// ttl share one pool), so a thousand keys cost a few connections and no thread each.
///
/// `sqlite:///absolute/path/locks.db` as the URI keeps the locks in one SQLite file for
/// the processes of one host (no server; `database` is ignored, pass "").
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
        crate::log::sync()?;
        let curi = cstring("uri", uri)?;
        let cdb = cstring("database", database)?;
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::mongoelector_client_new(curi.as_ptr(), cdb.as_ptr(), &mut ptr) })?;
        Ok(Client {
            inner: Arc::new(ClientInner { ptr }),
        })
    }

    /// The server's name ("MongoDB", "FerretDB", "mongo-java-server", "SQLite") and
    /// version. One round trip the first time; the client remembers the answer.
    pub fn server_info(&self) -> Result<(String, String)> {
        let mut name: *mut c_char = ptr::null_mut();
        let mut version: *mut c_char = ptr::null_mut();
        check(unsafe {
            sys::mongoelector_client_server_info_copy(self.inner.ptr, &mut name, &mut version)
        })?;
        // Copies owned by us: mongoelector_free.
        Ok(unsafe { (take_c_string(name), take_c_string(version)) })
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}
