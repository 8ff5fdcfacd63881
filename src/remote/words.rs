//! The words this machine says to a host's login shell, in one place: the
//! shell is the user's (sh, bash, zsh, fish, tcsh), so a word is sent only
//! if every one of them reads it as itself, or quoted for a POSIX shell
//! where Corral's own shell line is sure to be read by one. A command's
//! own words never cross as shell words at all: they go on standard input
//! (see `ssh.rs`).

/// `word` for a POSIX shell: single-quoted, each `'` as `'\''`. Only for
/// Corral's own fixed words (see `Ssh::shell_line`).
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// True for a word every shell reads as itself (sh, bash, zsh, fish, csh):
/// letters, digits and `/ . _ + -`, a leading `~/` for the home folder.
pub fn is_plain_word(word: &str) -> bool {
    let rest = word.strip_prefix("~/").unwrap_or(word);
    !rest.is_empty()
        && !rest.starts_with('-')
        && rest.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '+' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_word_is_one_no_shell_reads_otherwise() {
        assert!(is_plain_word("~/.local/bin/corral") && is_plain_word("/usr/bin/corral") && is_plain_word("corral"));
        for bad in ["a b", "x;y", "$(id)", "-rf", "~", "c'x", "a\\b"] {
            assert!(!is_plain_word(bad), "{bad}");
        }
        assert_eq!(quote("it's"), r"'it'\''s'");
    }
}
