//! What a source offers for a fact: candidates, each with its rank (the first valid one
//! wins). Below both the facts (`networks.rs`, `mod.rs`) and the sources that offer them
//! (`platforms/`).

/// Where each source stands: the first valid candidate wins. The built-in sources' ranks;
/// a platform source ranks its candidates between them (cluster-wide before `KUBEADM`,
/// per-node after it).
pub(crate) mod rank {
    pub const FLAG: u8 = 0;
    /// The Service network's ServiceCIDR objects.
    pub const SERVICE_CIDR: u8 = 10;
    /// The cluster domain's kubelet config, resolv.conf and CoreDNS Corefile.
    pub const KUBELET: u8 = 10;
    pub const RESOLV_CONF: u8 = 20;
    pub const COREDNS: u8 = 30;
    pub const KUBEADM: u8 = 100;
    /// The Pod network's last source: the Node objects' own ranges.
    pub const NODE_POD_CIDRS: u8 = 200;
}

/// A candidate with its rank.
pub(crate) type Ranked<T> = (u8, T);

/// How a found fact names its source.
pub(crate) enum Label {
    /// As given.
    Fixed(String),
    /// `label (N nouns)`: how many of the parts gave a value.
    Count(String, &'static str),
    /// The parts that gave a value, by what they are, comma-separated.
    Names,
}

/// One source: the objects read (what each is, for skipped values, and its raw values).
pub(crate) struct Candidate {
    pub parts: Vec<(String, Vec<String>)>,
    pub label: Label,
    /// Where discovery looked, for the "not found" message when nothing was valid.
    pub absent: Option<String>,
}

impl Candidate {
    pub(crate) fn one(
        what: String,
        values: Vec<String>,
        label: Label,
        absent: Option<String>,
    ) -> Self {
        Candidate {
            parts: vec![(what, values)],
            label,
            absent,
        }
    }
}

/// A cluster domain candidate: a value and its source, or where discovery looked in vain.
pub(crate) enum Domain {
    Found(String, Option<String>),
    Looked(String),
}
