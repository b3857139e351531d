//! The open-files limit (`RLIMIT_NOFILE`): every client connection of the data plane, every
//! upstream connection and every listener is a file descriptor, and the soft limit many
//! systems start processes with (1024) runs out long before [`crate::dataplane`]'s connection
//! limit. nginx raises it with `worker_rlimit_nofile`; the emulator raises its soft limit to
//! the hard limit at start, which needs no privilege (getrlimit(2)).

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Raises the soft `RLIMIT_NOFILE` to the hard limit. Returns the soft limit now in force.
/// Errors: the system refused to read or set the limit (the process keeps the old one).
pub fn raise_limit() -> Result<u64, nix::Error> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok(getrlimit(Resource::RLIMIT_NOFILE)?.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn soft_limit_reaches_the_hard_limit() {
        let soft = super::raise_limit().unwrap();
        let (_, hard) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(soft, hard);
    }
}
