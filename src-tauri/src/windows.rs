//! The two windows (main, quick ask), the tray icon and the global shortcut that reach them.

use anyhow::{Context, Result};
use tauri::menu::{Menu, MenuItem};
use tauri::tray::{MouseButton, MouseButtonState, TrayIconBuilder, TrayIconEvent};
use tauri::{AppHandle, Manager};

pub const MAIN: &str = "main";
pub const QUICK_ASK: &str = "quick-ask";
/// Opens or hides the quick-ask window from anywhere.
pub const QUICK_ASK_SHORTCUT: &str = "CommandOrControl+Shift+Space";

pub fn show(app: &AppHandle, label: &str) -> Result<()> {
    let window = app.get_webview_window(label).with_context(|| format!("no {label} window"))?;
    window.unminimize()?;
    window.show()?;
    window.set_focus()?;
    Ok(())
}

pub fn toggle_quick_ask(app: &AppHandle) {
    if let Some(w) = app.get_webview_window(QUICK_ASK) {
        if w.is_visible().unwrap_or(false) {
            let _ = w.hide();
        } else {
            let _ = show(app, QUICK_ASK);
        }
    }
}

const TRAY: &str = "quire";

/// The tray's menu, in `language`.
fn tray_menu(app: &AppHandle, language: &str) -> Result<Menu<tauri::Wry>> {
    let words = quire_words::Words::new(language);
    let quick = MenuItem::with_id(app, "quick", words.word("tray.quickAsk"), true, None::<&str>)?;
    let open = MenuItem::with_id(app, "open", words.word("tray.open"), true, None::<&str>)?;
    let quit = MenuItem::with_id(app, "quit", words.word("tray.quit"), true, None::<&str>)?;
    Ok(Menu::with_items(app, &[&quick, &open, &quit])?)
}

/// The tray's menu said in `language` from now on.
pub fn set_tray_language(app: &AppHandle, language: &str) -> Result<()> {
    if let Some(tray) = app.tray_by_id(TRAY) {
        tray.set_menu(Some(tray_menu(app, language)?))?;
    }
    Ok(())
}

pub fn install_tray(app: &AppHandle, language: &str) -> Result<()> {
    let menu = tray_menu(app, language)?;
    let icon = app.default_window_icon().cloned().context("the app has no icon")?;
    TrayIconBuilder::with_id(TRAY)
        .icon(icon)
        .tooltip("Quire")
        .menu(&menu)
        .show_menu_on_left_click(false)
        .on_menu_event(|app, event| match event.id.as_ref() {
            "quick" => {
                let _ = show(app, QUICK_ASK);
            }
            "open" => {
                let _ = show(app, MAIN);
            }
            "quit" => app.exit(0),
            _ => {}
        })
        .on_tray_icon_event(|tray, event| {
            if let TrayIconEvent::Click { button: MouseButton::Left, button_state: MouseButtonState::Up, .. } = event {
                toggle_quick_ask(tray.app_handle());
            }
        })
        .build(app)?;
    Ok(())
}

/// Registers the global shortcut; where the desktop does not allow one (Wayland without a
/// portal, say) the tray still opens the window, so a failure is reported, not fatal.
pub fn install_shortcut(app: &AppHandle) -> Result<()> {
    use tauri_plugin_global_shortcut::{Builder, ShortcutState};
    app.plugin(
        Builder::new()
            .with_shortcuts([QUICK_ASK_SHORTCUT])?
            .with_handler(|app, _shortcut, event| {
                if event.state == ShortcutState::Pressed {
                    toggle_quick_ask(app);
                }
            })
            .build(),
    )?;
    Ok(())
}
