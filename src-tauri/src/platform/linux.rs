//! Linux: the person's default application for the file's type, found as the freedesktop.org
//! specifications say (`mimeapps.list`, then `mimeinfo.cache`, in the XDG config and data
//! folders) and started from its desktop entry's `Exec` line, with the page for the PDF
//! viewers whose command line takes one. Without a default application, the system opener
//! (xdg-open and friends) is tried; without one either, the error says what to do.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::Opened;

pub(super) fn open(path: &Path, page: Option<u32>) -> Result<Opened> {
    let mime = mime_type(path);
    if let Some((id, exec)) = default_application(mime) {
        let (program, args, at_page) =
            command_line(&exec, path, page).with_context(|| format!("the desktop entry {id} has no command to run"))?;
        let mut child = Command::new(&program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("{program} (the default application for {mime}) could not be started"))?;
        // Reaped when it exits, so no zombie is left behind while Quire runs.
        std::thread::spawn(move || child.wait());
        let name = Path::new(&program).file_name().map_or(program.clone(), |n| n.to_string_lossy().into_owned());
        return Ok(Opened { program: name, at_page });
    }
    open::that_detached(path).map_err(|_| {
        anyhow::anyhow!(
            "no program on this computer is set to open {} files ({mime}): install a viewer for them, or read \
             the passage here",
            kind_name(path)
        )
    })?;
    Ok(Opened { program: "the system's opener".into(), at_page: false })
}

fn extension(path: &Path) -> String {
    path.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default()
}

fn mime_type(path: &Path) -> &'static str {
    match extension(path).as_str() {
        "pdf" => "application/pdf",
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "epub" => "application/epub+zip",
        _ => "text/plain",
    }
}

fn kind_name(path: &Path) -> String {
    match extension(path).as_str() {
        "md" | "markdown" => "Markdown".into(),
        "htm" => "HTML".into(),
        "txt" | "text" => "text".into(),
        e => e.to_uppercase(),
    }
}

/// The XDG folders, most important first: `$XDG_<name>_HOME` (or `~/<home_default>`), then
/// each of `$XDG_<name>_DIRS` (or `dirs_default`).
fn xdg_dirs(name: &str, home_default: &str, dirs_default: &str) -> Vec<PathBuf> {
    let var = |v: String| std::env::var_os(v).filter(|s| !s.is_empty());
    let mut out = Vec::new();
    match var(format!("XDG_{name}_HOME")) {
        Some(home) => out.push(PathBuf::from(home)),
        None => out.extend(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_default))),
    }
    let dirs = var(format!("XDG_{name}_DIRS")).map_or(dirs_default.into(), |d| d.to_string_lossy().into_owned());
    out.extend(dirs.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    out
}

/// The default application for `mime`: its desktop entry's id and `Exec` line.
fn default_application(mime: &str) -> Option<(String, String)> {
    let data = xdg_dirs("DATA", ".local/share", "/usr/local/share:/usr/share");
    let applications: Vec<PathBuf> = data.iter().map(|d| d.join("applications")).collect();
    let exec_of = |id: &str| {
        let entry = applications.iter().find_map(|dir| std::fs::read_to_string(dir.join(id)).ok())?;
        desktop_exec(&entry)
    };
    let lists = xdg_dirs("CONFIG", ".config", "/etc/xdg")
        .into_iter()
        .chain(applications.iter().cloned())
        .map(|d| d.join("mimeapps.list"));
    let caches = applications.iter().map(|d| d.join("mimeinfo.cache"));
    let ids = lists
        .map(|f| (f, "Default Applications"))
        .chain(caches.map(|f| (f, "MIME Cache")))
        .filter_map(|(file, group)| std::fs::read_to_string(file).ok().map(|text| ini_list(&text, group, mime)))
        .flatten();
    ids.into_iter().find_map(|id| exec_of(&id).map(|exec| (id, exec)))
}

/// The desktop entries `key` lists in `group` of an INI-style file (`a.desktop;b.desktop;`).
fn ini_list(text: &str, group: &str, key: &str) -> Vec<String> {
    let value = ini_value(text, group, key).unwrap_or_default();
    value.split(';').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// The `Exec` line of a desktop entry's `[Desktop Entry]` group.
fn desktop_exec(entry: &str) -> Option<String> {
    ini_value(entry, "Desktop Entry", "Exec")
}

/// The value of `key` in `group` of an INI-style file (the first, as the specifications read it).
fn ini_value(text: &str, group: &str, key: &str) -> Option<String> {
    let mut in_group = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_group = line == format!("[{group}]");
        } else if let Some((k, v)) = line.split_once('=').filter(|_| in_group) {
            if k.trim() == key {
                return Some(v.trim().to_owned());
            }
        }
    }
    None
}

/// The program and arguments an `Exec` line runs for `path` (field codes replaced, quoting
/// undone as the Desktop Entry specification says), and whether `page` was passed: to the PDF
/// viewers whose command line takes a page.
fn command_line(exec: &str, path: &Path, page: Option<u32>) -> Option<(String, Vec<String>, bool)> {
    let file = path.to_string_lossy().into_owned();
    let mut words = exec_words(exec).into_iter();
    let program = words.next()?;
    let name = Path::new(&program).file_name()?.to_string_lossy().into_owned();
    let page = page.filter(|_| extension(path) == "pdf");
    let browser = ["firefox", "firefox-esr", "chromium", "google-chrome", "microsoft-edge"].contains(&name.as_str());
    // Browsers open a PDF at a page through the URL's fragment.
    let target = match page {
        Some(p) if browser => format!("file://{}#page={p}", percent_encode_path(&file)),
        _ => file,
    };
    let mut args = Vec::new();
    let mut placed = false;
    for word in words {
        match word.as_str() {
            "%f" | "%F" | "%u" | "%U" => {
                args.push(target.clone());
                placed = true;
            }
            // Icon, translated name and entry location: nothing Quire passes.
            "%i" | "%c" | "%k" => {}
            w => args.push(w.replace("%%", "%")),
        }
    }
    if !placed {
        args.push(target.clone());
    }
    let at_page = match (page, name.as_str()) {
        (Some(p), "evince" | "atril" | "xreader") => {
            args.insert(0, format!("--page-index={p}"));
            true
        }
        (Some(p), "okular") => {
            args.splice(0..0, ["-p".to_owned(), p.to_string()]);
            true
        }
        (Some(p), "zathura") => {
            args.splice(0..0, ["-P".to_owned(), p.to_string()]);
            true
        }
        (Some(_), _) => browser,
        (None, _) => false,
    };
    Some((program, args, at_page))
}

/// An `Exec` line split into words: double-quoted words kept whole, with `\"`, `` \` ``, `\$`
/// and `\\` unescaped inside them.
fn exec_words(exec: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut started) = (false, false);
    let mut chars = exec.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            '\\' if quoted => word.extend(chars.next()),
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// A path as a `file://` URL's path: bytes other than unreserved ones and `/` percent-encoded.
fn percent_encode_path(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_application_is_read_as_the_specification_says() {
        let list = "[Added Associations]\napplication/pdf=gimp.desktop;\n\n[Default Applications]\n\
                    text/plain=gedit.desktop\napplication/pdf = org.gnome.Evince.desktop;okular.desktop;\n";
        assert_eq!(
            ini_list(list, "Default Applications", "application/pdf"),
            ["org.gnome.Evince.desktop", "okular.desktop"]
        );
        assert_eq!(ini_list(list, "Default Applications", "text/html"), Vec::<String>::new());
        let entry =
            "[Desktop Entry]\nName=Document Viewer\nExec=evince %U\n\n[Desktop Action new]\nExec=evince --new\n";
        assert_eq!(desktop_exec(entry).as_deref(), Some("evince %U"));
    }

    #[test]
    fn pdf_viewers_that_take_a_page_are_sent_to_it() {
        let pdf = Path::new("/docs/a manual.pdf");
        let line = |exec: &str, page| command_line(exec, pdf, page).unwrap();
        assert_eq!(
            line("evince %U", Some(12)),
            ("evince".into(), vec!["--page-index=12".into(), "/docs/a manual.pdf".into()], true)
        );
        assert_eq!(line("/usr/bin/okular %U", Some(3)).1, ["-p", "3", "/docs/a manual.pdf"]);
        assert_eq!(line("zathura %f", Some(3)).1, ["-P", "3", "/docs/a manual.pdf"]);
        assert_eq!(line("firefox %u", Some(7)).1, ["file:///docs/a%20manual.pdf#page=7"]);
        // A viewer whose command line takes no page gets the file alone, and says so.
        assert_eq!(
            line("\"/opt/My Viewer/view\" --flag %F", Some(5)),
            ("/opt/My Viewer/view".into(), vec!["--flag".into(), "/docs/a manual.pdf".into()], false)
        );
        // No field code: the file goes last; no page, no page argument.
        assert_eq!(line("evince", None).1, ["/docs/a manual.pdf"]);
        // Pages only for PDFs.
        let md = command_line("evince %U", Path::new("/docs/notes.md"), Some(2)).unwrap();
        assert_eq!((md.1, md.2), (vec!["/docs/notes.md".to_string()], false));
        assert_eq!(exec_words(r#"sh -c "echo \"hi\" 100%%" %i"#), ["sh", "-c", "echo \"hi\" 100%%", "%i"]);
    }
}
