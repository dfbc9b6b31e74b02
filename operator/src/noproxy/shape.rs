//! The shape of a name intent: all that the client models can tell about it. Render asks the
//! models whether a spelling sends the apex of `*.d` direct and whether the dotted names go
//! direct; intents of one shape get the same answers, so it asks once per shape.
//!
//! A label is *plain* when no model treats it or `x` + it specially: only `a-z`, `0-9` and
//! `-`; at least one letter from `g` to `z` other than `x` (no client reads it as a number in
//! any base, so a URL parser never takes the name for an IPv4 address); no `--` (neither it
//! nor `x` + it is an IDNA `xn--` label, and httpx's `xn--` check never applies); no
//! `ocalhost` (neither is or contains `localhost`). A plain label enters the shape as its
//! length; any other label, the scope, the port and the text each spelling has around the
//! name enter it verbatim.
//!
//! Why this is exact: the probes (`x.d.`, `xd.`, `d.` with the intent's port) and values (the
//! spellings, with and without a trailing dot) are the same templates around the name for
//! every intent of a shape. The models compare a host with an entry by equality, by suffix
//! (with or without a `.` before it; Java's leading `*`), after cutting fixed
//! characters off the ends (`.`, `*.`, `:port`) or at `,`, `|`, `:`, `/` and blanks, none of
//! which a name holds; two such strings around one name compare the same whatever the plain
//! labels spell, and the label count and lengths are kept. What remains is content: numbers
//! (IPv4 in any base, `127.*`), `localhost`, `0.0.0.0` and `xn--`, which plain labels exclude.
//! The test in `render` compares memoized and unmemoized renders on random names.

use super::entry::NameScope;

/// One label of a name: its length when plain, else its text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Label {
    Plain(usize),
    Literal(String),
}

/// One spelling of the intent: the text before and after the name.
type Around = (String, String);

/// What the model checks depend on for a name intent (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Shape {
    labels: Vec<Label>,
    scope: NameScope,
    port: Option<u16>,
    spellings: Vec<Around>,
}

impl Shape {
    /// The shape of `name` spelled as `entries`; `None` when it would not be shared (no
    /// plain label) or a spelling does not contain the name.
    pub(super) fn of(
        name: &str,
        scope: NameScope,
        port: Option<u16>,
        entries: &[String],
    ) -> Option<Shape> {
        let labels: Vec<Label> = name
            .split('.')
            .map(|l| {
                if plain(l) {
                    Label::Plain(l.len())
                } else {
                    Label::Literal(l.to_owned())
                }
            })
            .collect();
        if !labels.iter().any(|l| matches!(l, Label::Plain(_))) {
            return None;
        }
        let spellings = entries
            .iter()
            .map(|e| {
                let at = e.find(name)?;
                Some((e[..at].to_owned(), e[at + name.len()..].to_owned()))
            })
            .collect::<Option<Vec<Around>>>()?;
        Some(Shape {
            labels,
            scope,
            port,
            spellings,
        })
    }
}

/// True for a label no model treats specially (see the module docs).
pub(super) fn plain(label: &str) -> bool {
    let b = label.as_bytes();
    b.iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.iter().any(|c| (b'g'..=b'z').contains(c) && *c != b'x')
        && !label.contains("--")
        && !label.contains("ocalhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(name: &str) -> Option<Shape> {
        Shape::of(name, NameScope::Host, None, &[name.to_owned()])
    }

    #[test]
    fn plain_labels() {
        for l in ["host-1", "svc", "corp", "example", "team-12", "g", "a1z"] {
            assert!(plain(l), "{l}");
        }
        for l in [
            "a",
            "cafe",
            "0x7f",
            "123",
            "xx",
            "xn--p1ai",
            "n--a",
            "ab--cd",
            "localhost",
            "ocalhost",
            "mylocalhost",
            "under_score",
            "",
        ] {
            assert!(!plain(l), "{l}");
        }
    }

    #[test]
    fn shapes() {
        // Same lengths, plain labels: one shape.
        assert_eq!(
            of("host-1.svc-2.corp.example"),
            of("host-7.svc-9.corp.example")
        );
        // A length, a literal label, the label count, scope, port or spelling: another.
        assert_ne!(
            of("host-1.svc.corp.example"),
            of("host-10.svc.corp.example")
        );
        assert_ne!(of("host.cafe"), of("host.face"));
        assert_ne!(of("host.example"), of("host.example.svc"));
        assert_ne!(of("host.localhost"), of("host.ocalhost"));
        let h = Shape::of("host", NameScope::Host, None, &["host".into()]);
        assert_ne!(
            h,
            Shape::of("host", NameScope::Domain, None, &["host".into()])
        );
        assert_ne!(
            h,
            Shape::of("host", NameScope::Host, Some(80), &["host".into()])
        );
        assert_ne!(
            h,
            Shape::of("host", NameScope::Host, None, &[".host".into()])
        );
        // Nothing shared: no shape.
        assert_eq!(of("a.cafe"), None);
        assert_eq!(
            Shape::of("host", NameScope::Host, None, &["*".into()]),
            None
        );
    }
}
