//! Quoting for the outputs: systemd unit files, POSIX shell, YAML.

use anyhow::ensure;

/// `value` for the inside of a double-quoted word of a systemd `Environment=` line: `\` and
/// `"` escaped with `\`, `%` (a specifier) doubled. Control characters have no spelling
/// that survives every systemd version: an error.
pub fn systemd_quote(value: &str) -> anyhow::Result<String> {
    ensure!(
        !value.chars().any(char::is_control),
        "a control character cannot be written in a systemd Environment= value"
    );
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' | '"' => {
                out.push('\\');
                out.push(c);
            }
            '%' => out.push_str("%%"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `value` as one POSIX shell word: in single quotes, each `'` written as `'\''`.
pub fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// `value` as a YAML double-quoted scalar (a JSON string is one).
pub fn yaml_string(value: &str) -> String {
    serde_json::Value::String(value.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_escapes_backslash_quote_and_percent() {
        assert_eq!(systemd_quote("a,.b,10.0.0.0/8").unwrap(), "a,.b,10.0.0.0/8");
        assert_eq!(systemd_quote(r#"a\b"c%d"#).unwrap(), r#"a\\b\"c%%d"#);
        assert!(systemd_quote("a\nb").is_err());
    }

    #[test]
    fn shell_words_are_single_quoted() {
        assert_eq!(shell_quote("a,b"), "'a,b'");
        assert_eq!(shell_quote("it's $HOME"), r"'it'\''s $HOME'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn yaml_strings_are_json_strings() {
        assert_eq!(yaml_string("a,*.b"), r#""a,*.b""#);
        assert_eq!(yaml_string("q\"\\"), r#""q\"\\""#);
    }
}
