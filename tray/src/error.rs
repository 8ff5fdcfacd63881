//! Why the tray could not do something: a typed error carrying what failed.

/// What went wrong in the tray.
#[derive(Debug, thiserror::Error)]
pub enum TrayError {
    #[error(transparent)]
    Store(#[from] corral::store::StoreError),
    #[error(transparent)]
    Heal(#[from] corral::upkeep::heal::HealError),
    #[error("cannot create the tray icon: {0}")]
    Icon(#[from] tray_icon::Error),
    #[error("cannot draw the tray icon: {0}")]
    Drawing(#[from] tray_icon::BadIcon),
    #[error("cannot build the tray menu: {0}")]
    Menu(#[from] tray_icon::menu::Error),
    #[error("cannot find how to start shepherds: {0}")]
    Shepherd(std::io::Error),
    #[error("cannot start the store watcher: {0}")]
    Watcher(std::io::Error),
    #[error("cannot start applying [retention]: {0}")]
    Retention(std::io::Error),
    #[error("cannot start following the hosts of config.toml: {0}")]
    Hosts(std::io::Error),
    #[error("cannot start following pull requests: {0}")]
    Pulls(std::io::Error),
    #[error("cannot start firing the schedules: {0}")]
    Schedules(std::io::Error),
}
