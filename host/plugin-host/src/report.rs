//! What `kpack plugins list` and `kpack plugins classify` print of a
//! [`HandlerSet`]: the handlers ([`Listed`]), a table of them
//! ([`HandlerSet::table`]), and a tree's classification
//! ([`TreeClassification`]), each as a `Serialize` document or text.

use std::fmt;

use kpack_split::{Claim, Classification};
use serde::Serialize;

use crate::run::HandlerSet;
use crate::types::HandlerMeta;

/// A handler as `plugins list --json` and `plugins classify --json` show it.
#[derive(Debug, Serialize)]
pub struct Listed<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its version.
    pub version: String,
    /// The WIT version it was built against.
    pub wit: String,
    /// Where it was loaded from.
    pub origin: String,
    /// sha256 of its component.
    pub sha256: &'a str,
}

impl<'a> From<&'a HandlerMeta> for Listed<'a> {
    fn from(h: &'a HandlerMeta) -> Listed<'a> {
        Listed {
            name: &h.name,
            version: h.version.to_string(),
            wit: h.wit.to_string(),
            origin: h.origin.to_string(),
            sha256: &h.sha256,
        }
    }
}

impl HandlerSet {
    /// Every handler, as listed.
    pub fn listed(&self) -> Vec<Listed<'_>> {
        self.handlers().map(Listed::from).collect()
    }

    /// The table of `plugins list`: a header, then one row per handler.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<20} {:<10} {:<8} {:<64} ORIGIN\n",
            "NAME", "VERSION", "WIT", "SHA256"
        );
        for h in self.handlers() {
            out.push_str(&format!(
                "{:<20} {:<10} {:<8} {:<64} {}\n",
                h.name,
                h.version.to_string(),
                h.wit.to_string(),
                h.sha256,
                h.origin
            ));
        }
        out
    }
}

/// One file and the handler that claims it (all null: none).
#[derive(Debug, Serialize)]
pub struct Claimed<'a> {
    /// The file, relative to the tree.
    pub path: &'a str,
    /// The handler that claims it.
    pub handler: Option<&'a str>,
    /// Its bundle key (`generic`, `gfx942`, `gfx11`).
    pub key: Option<String>,
    /// Whether it is generic.
    pub generic: Option<bool>,
}

/// `plugins classify`'s document: the handlers asked and each file.
#[derive(Debug, Serialize)]
pub struct TreeClassification<'a> {
    /// The handlers, in probe order.
    pub handlers: Vec<Listed<'a>>,
    /// The files claimed (every file, with `all`).
    pub files: Vec<Claimed<'a>>,
}

impl<'a> TreeClassification<'a> {
    /// The document of `files` ([`HandlerSet::classify_tree`]'s answer)
    /// classified by `set`; files no handler claims only with `all`.
    pub fn new(
        set: &'a HandlerSet,
        files: &'a [(String, Option<Claim>)],
        all: bool,
    ) -> TreeClassification<'a> {
        let files = files
            .iter()
            .filter(|(_, c)| all || c.is_some())
            .map(|(path, claim)| Claimed {
                path,
                handler: claim.as_ref().map(|c| c.handler.as_str()),
                key: claim.as_ref().map(|c| c.classification.to_string()),
                generic: claim
                    .as_ref()
                    .map(|c| c.classification == Classification::Generic),
            })
            .collect();
        TreeClassification {
            handlers: set.listed(),
            files,
        }
    }
}

impl fmt::Display for TreeClassification<'_> {
    /// `KEY\tHANDLER\tPATH` per file (`-` for none).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.files {
            writeln!(
                f,
                "{}\t{}\t{}",
                c.key.as_deref().unwrap_or("-"),
                c.handler.unwrap_or("-"),
                c.path
            )?;
        }
        Ok(())
    }
}
