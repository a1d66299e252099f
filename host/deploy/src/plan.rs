//! The plan of a deploy: every file or link to write into the output, and
//! what was left out; built by the closure and database steps, written
//! by the deploy.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::manifest::LeftOutRecord;

/// One file or link to write.
pub(crate) struct Item {
    pub(crate) rel: String,
    pub(crate) source: PathBuf,
    pub(crate) kind: &'static str,
    pub(crate) link: Option<String>,
    pub(crate) keep: Option<Vec<String>>,
    /// Offload the copy, keeping these (GPU, target) pairs' code.
    pub(crate) offload: Option<Vec<(String, String)>>,
    pub(crate) runpath: Option<&'static str>,
    pub(crate) needed_by: Vec<String>,
    pub(crate) serves: BTreeSet<String>,
    /// A database file's handler and classification.
    pub(crate) database: Option<String>,
}

impl Item {
    pub(crate) fn new(rel: String, source: PathBuf, kind: &'static str) -> Item {
        Item {
            rel,
            source,
            kind,
            link: None,
            keep: None,
            offload: None,
            runpath: None,
            needed_by: Vec::new(),
            serves: BTreeSet::new(),
            database: None,
        }
    }
}

/// The plan: every output and what was left out.
#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) items: BTreeMap<String, Item>,
    pub(crate) left_out: Vec<LeftOutRecord>,
    /// Bytes of the inputs as they are: binaries, every archive and every
    /// database file.
    pub(crate) fat_bytes: u64,
}

impl Plan {
    pub(crate) fn add(&mut self, item: Item) -> Result<&mut Item> {
        let rel = item.rel.clone();
        if let Some(old) = self.items.get(&rel) {
            let same = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            if same(&old.source) != same(&item.source) || old.link != item.link {
                return Err(Error::Conflict {
                    rel,
                    first: old.source.clone(),
                    second: item.source,
                });
            }
        } else {
            self.items.insert(rel.clone(), item);
        }
        self.items.get_mut(&rel).ok_or(Error::Conflict {
            rel: String::new(),
            first: PathBuf::new(),
            second: PathBuf::new(),
        })
    }
}
