//! Every configured host followed at once, as `config.toml` says now: a
//! follower thread per host, started when a host is added, stopped when it
//! is removed or changed. What the tray runs; it sleeps until the settings
//! file is written (inotify), so an idle fleet makes no wakeups of its own.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::thread::JoinHandle;

use super::{follow, FollowLock, Following};
use crate::home::config::{Config, HostConfig};
use crate::home::Home;
use crate::process::{self, FolderWatch};

/// The followers at work. Runtime state only.
pub struct Fleet {
    home: Home,
    followers: HashMap<String, (HostConfig, Following, JoinHandle<()>)>,
}

impl Fleet {
    /// No host followed yet.
    pub fn new(home: Home) -> Fleet {
        Fleet { home, followers: HashMap::new() }
    }

    /// Follows exactly `hosts`: new ones started, removed or changed ones
    /// stopped (a changed one started again). A host another process
    /// follows already is left to it.
    pub fn sync(&mut self, hosts: &[HostConfig]) {
        let gone: Vec<String> = self
            .followers
            .iter()
            .filter(|(name, (config, _, _))| !hosts.iter().any(|h| &h.name == *name && h == config))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            if let Some((_, following, thread)) = self.followers.remove(&name) {
                following.stop();
                let _ = thread.join();
            }
        }
        for host in hosts {
            if self.followers.contains_key(&host.name) {
                continue;
            }
            let Some(lock) = FollowLock::try_take(&self.home, &host.name) else {
                tracing::info!(host = %host.name, "another process follows this host");
                continue;
            };
            let following = Following::default();
            let (home, config, f) = (self.home.clone(), host.clone(), following.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("corral-host-{}", host.name))
                .spawn(move || follow(&home, &config, &f, lock));
            match spawned {
                Ok(thread) => {
                    self.followers.insert(host.name.clone(), (host.clone(), following, thread));
                }
                Err(e) => tracing::warn!(host = %host.name, "cannot start following: {e}"),
            }
        }
    }

    /// Follows the hosts of `config.toml` for as long as the process
    /// lives, again whenever the file is written. Returns only if the
    /// kernel cannot tell of the file's changes.
    pub fn run(mut self) -> std::io::Result<()> {
        crate::home::ensure_private_dir(self.home.config_dir()).map_err(std::io::Error::other)?;
        let watch = FolderWatch::written_whole(self.home.config_dir(), "config.toml")?;
        loop {
            match Config::load(&self.home) {
                Ok(config) => self.sync(&config.hosts),
                Err(e) => tracing::warn!("not following hosts: {e}"),
            }
            // Asleep until the settings are written.
            loop {
                process::wait_readable(&[watch.as_fd()], None)?;
                if watch.drain() {
                    break;
                }
            }
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for (_, (_, following, _)) in self.followers.drain() {
            following.stop();
        }
    }
}
