//! What the process sets up before the server starts, and the OS error text it reports.

use std::io;

/// An OS error's text without Rust's " (os error N)" suffix: what C's strerror gives.
pub fn os_error_text(e: &io::Error) -> String {
    let text = e.to_string();
    match (e.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => text[..at].to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_text_is_strerror() {
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(os_error_text(&e), "No such file or directory");
        let custom = io::Error::other("plain");
        assert_eq!(os_error_text(&custom), "plain");
    }
}
