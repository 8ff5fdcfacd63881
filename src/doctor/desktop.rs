//! The desktop the tray lives in, asked over the D-Bus session bus: the
//! notification server (and whether a click on a notification can open the
//! run: the `actions` capability), the StatusNotifierItem host that shows
//! the tray icon, and on GNOME the AppIndicator extension that provides it.

use std::collections::HashMap;
use std::time::Duration;

use zbus::{Connection, OwnedVariant};

use super::{Finding, Level};

const AREA: &str = "desktop";

/// How long the desktop checks may take in all: a bus that does not answer
/// is a finding, not a hang.
const WITHIN: Duration = Duration::from_secs(5);

/// The AppIndicator extension's ids (upstream, and Ubuntu's build of it).
const GNOME_EXTENSIONS: [&str; 2] = ["appindicatorsupport@rgcjonas.gmail.com", "ubuntu-appindicators@ubuntu.com"];

/// Notifications, the tray's host, and GNOME's extension.
pub fn check() -> Vec<Finding> {
    if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none() && std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        return vec![no_session("no D-Bus session bus here (DBUS_SESSION_BUS_ADDRESS is not set)")];
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return vec![Finding::new(AREA, "session bus", Level::Warn, format!("cannot ask it: {e}"))],
    };
    runtime.block_on(async {
        match tokio::time::timeout(WITHIN, ask()).await {
            Ok(findings) => findings,
            Err(_) => vec![Finding::new(AREA, "session bus", Level::Warn, "the desktop did not answer within 5 s")],
        }
    })
}

fn no_session(detail: &str) -> Finding {
    Finding::new(
        AREA,
        "session bus",
        Level::Warn,
        format!("{detail}: notifications and the tray icon need a desktop session"),
    )
    .fix("run Corral's tray inside your desktop session (over SSH, the CLI and MCP work without it)")
}

async fn ask() -> Vec<Finding> {
    let bus = match Connection::session().await {
        Ok(bus) => bus,
        Err(e) => return vec![no_session(&format!("cannot reach the session bus ({e})"))],
    };
    let mut findings = vec![notifications(&bus).await];
    findings.extend(tray_host(&bus).await);
    findings
}

/// The notification server, and whether it shows actions.
async fn notifications(bus: &Connection) -> Finding {
    const NAME: &str = "org.freedesktop.Notifications";
    const PATH: &str = "/org/freedesktop/Notifications";
    let info = match bus.call_method(Some(NAME), PATH, Some(NAME), "GetServerInformation", &()).await {
        Ok(reply) => reply.body().deserialize::<(String, String, String, String)>().ok(),
        Err(e) => {
            return Finding::new(AREA, "notifications", Level::Warn, format!("no notification server answers ({e})"))
                .fix("start your desktop's notification daemon (GNOME Shell, KDE Plasma, dunst, mako, xfce4-notifyd)")
        }
    };
    let server = info.map_or_else(
        || "a notification server".to_string(),
        |(name, vendor, version, _)| format!("{name} {version} ({vendor})"),
    );
    let capabilities: Vec<String> = match bus.call_method(Some(NAME), PATH, Some(NAME), "GetCapabilities", &()).await {
        Ok(reply) => reply.body().deserialize().unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    if capabilities.iter().any(|c| c == "actions") {
        Finding::ok(AREA, "notifications", format!("{server}; a click on one opens the run"))
    } else {
        Finding::new(
            AREA,
            "notifications",
            Level::Note,
            format!(
                "{server} shows notifications without actions: a click cannot open the run (open it from the tray)"
            ),
        )
    }
}

/// The StatusNotifierItem host, and GNOME's extension when on GNOME.
async fn tray_host(bus: &Connection) -> Vec<Finding> {
    const WATCHER: &str = "org.kde.StatusNotifierWatcher";
    let registered = bus
        .call_method(
            Some(WATCHER),
            "/StatusNotifierWatcher",
            Some("org.freedesktop.DBus.Properties"),
            "Get",
            &(WATCHER, "IsStatusNotifierHostRegistered"),
        )
        .await
        .ok()
        .and_then(|reply| reply.body().deserialize::<OwnedVariant>().ok())
        .and_then(|v| bool::try_from(v).ok());
    let gnome =
        std::env::var("XDG_CURRENT_DESKTOP").is_ok_and(|d| d.split(':').any(|p| p.eq_ignore_ascii_case("gnome")));
    let mut findings = vec![match registered {
        Some(true) => Finding::ok(AREA, "tray", "a StatusNotifierItem host shows the tray icon"),
        Some(false) => Finding::new(AREA, "tray", Level::Warn, "a StatusNotifierWatcher runs, but no host shows icons")
            .fix(tray_fix(gnome)),
        None => {
            Finding::new(AREA, "tray", Level::Warn, "no StatusNotifierItem host: the tray icon has nowhere to show")
                .fix(tray_fix(gnome))
        }
    }];
    if gnome {
        findings.push(gnome_extension(bus).await);
    }
    findings
}

fn tray_fix(gnome: bool) -> &'static str {
    if gnome {
        "sudo apt install gnome-shell-extension-appindicator, log out and in, then `gnome-extensions enable ubuntu-appindicators@ubuntu.com` (or appindicatorsupport@rgcjonas.gmail.com)"
    } else {
        "use a panel with a system tray that speaks StatusNotifierItem (KDE, XFCE's status tray plugin, waybar's tray)"
    }
}

/// Whether GNOME Shell has the AppIndicator extension, and it is on.
async fn gnome_extension(bus: &Connection) -> Finding {
    const SHELL: &str = "org.gnome.Shell.Extensions";
    for uuid in GNOME_EXTENSIONS {
        let info = bus
            .call_method(Some(SHELL), "/org/gnome/Shell/Extensions", Some(SHELL), "GetExtensionInfo", &(uuid,))
            .await
            .ok()
            .and_then(|reply| reply.body().deserialize::<HashMap<String, OwnedVariant>>().ok())
            .unwrap_or_default();
        let Some(state) = info.get("state").and_then(|v| f64::try_from(v.clone()).ok()) else { continue };
        // GNOME's ExtensionState: 1 is ENABLED (ACTIVE in GNOME 46+).
        return if state == 1.0 {
            Finding::ok(AREA, "GNOME AppIndicator", format!("{uuid} is on"))
        } else {
            Finding::new(AREA, "GNOME AppIndicator", Level::Warn, format!("{uuid} is installed but not on"))
                .fix(format!("gnome-extensions enable {uuid}"))
        };
    }
    Finding::new(
        AREA,
        "GNOME AppIndicator",
        Level::Warn,
        "GNOME without the AppIndicator extension shows no tray icons",
    )
    .fix("sudo apt install gnome-shell-extension-appindicator, log out and in, then enable it in Extensions")
}
