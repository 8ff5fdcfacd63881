//! One tray per Corral home: an exclusive `flock` on `tray.lock` in its
//! data folder, held for the tray's life and freed by the kernel when the
//! process ends, however it ends. (The file descriptor is close-on-exec,
//! so shepherds and windows the tray starts do not hold it.)

use std::fs::File;

use corral::Home;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The lock of the running tray; dropping it frees the place.
pub struct Instance {
    _lock: Flock<File>,
}

/// Why the tray could not learn whether another one runs.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("cannot create Corral's data folder: {0}")]
    Home(#[from] corral::home::HomeError),
    #[error("cannot open {path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("cannot lock {path}: {source}")]
    Lock { path: String, source: Errno },
}

/// Becomes the tray of `home`, or returns `None` if another process is.
pub fn claim(home: &Home) -> Result<Option<Instance>, InstanceError> {
    home.ensure()?;
    let path = home.data_dir().join("tray.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| InstanceError::Open { path: path.display().to_string(), source })?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(Instance { _lock: lock })),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, source)) => Err(InstanceError::Lock { path: path.display().to_string(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_tray_of_the_same_home_stands_down_until_the_first_ends() {
        let root = tempfile::tempdir().unwrap();
        let home = Home::at(root.path());
        let first = claim(&home).unwrap();
        assert!(first.is_some());
        assert!(claim(&home).unwrap().is_none(), "one tray per home");
        let other = tempfile::tempdir().unwrap();
        assert!(claim(&Home::at(other.path())).unwrap().is_some(), "another home has its own tray");
        drop(first);
        assert!(claim(&home).unwrap().is_some(), "the place is free once the first ends");
    }
}
