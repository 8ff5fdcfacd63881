//! The error commands return to the webview: a typed error, serialized as
//! its message.

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] corral::store::StoreError),
    #[error(transparent)]
    Launch(#[from] corral::verbs::launch::LaunchError),
    #[error(transparent)]
    Config(#[from] corral::home::config::ConfigError),
    #[error(transparent)]
    Heal(#[from] corral::upkeep::heal::HealError),
    #[error(transparent)]
    Review(#[from] corral::verbs::review::ReviewError),
    #[error(transparent)]
    Forge(#[from] corral::forge::ForgeError),
    #[error(transparent)]
    Reply(#[from] corral::verbs::reply::ReplyError),
    #[error(transparent)]
    Allow(#[from] corral::verbs::allow::AllowError),
    #[error(transparent)]
    Pause(#[from] corral::verbs::pause::PauseError),
    #[error(transparent)]
    Answer(#[from] corral::attention::ask::AnswerError),
    #[error(transparent)]
    Autostart(#[from] corral::home::autostart::AutostartError),
    #[error(transparent)]
    Remote(#[from] corral::remote::RemoteError),
    #[error(transparent)]
    Budget(#[from] corral::cost::budget::BadBudget),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Tauri(#[from] tauri::Error),
    #[error("{0}")]
    Invalid(String),
}

impl serde::Serialize for AppError {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}
