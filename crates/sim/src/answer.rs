//! What an operation hands back once the server's lock is let go: a LIST page and a write's
//! answer, their objects shared with the store (not copied under the lock), each object's JSON
//! encoded once for every LIST, watch and answer that serves that version of it.
//!
//! Responsibility: [`ListPage`] (a LIST response) and [`Answer`] (a write's), as JSON values or
//! bytes. Inputs: shared stored objects, their resource type and the requested version.
//! Outputs: served JSON.

use std::sync::Arc;

use serde_json::Value;

use crate::convert::{encode_served, served, to_served};
use crate::object;
use crate::registry::ResourceDef;
use crate::store::Stored;

/// One item of a LIST page.
#[derive(Debug)]
pub(crate) enum ListItem {
    /// A stored object, served as it is stored (plus `apiVersion` and `kind`).
    Shared(Arc<Stored>),
    /// An object already converted to its served form.
    Served(Value),
}

impl ListItem {
    pub(crate) fn value(&self) -> &Value {
        match self {
            Self::Shared(s) => &s.value,
            Self::Served(v) => v,
        }
    }

    pub(crate) fn into_served(self, def: &ResourceDef, version: &str) -> Value {
        match self {
            Self::Shared(s) => to_served(def, version, s.value.clone()),
            Self::Served(v) => v,
        }
    }
}

/// A LIST response whose items are shared with the store: taken under the server's lock
/// without copying an object, encoded after it is let go, each object's JSON encoded once for
/// every LIST and watch that serves that version of it.
#[derive(Debug)]
pub struct ListPage {
    pub(crate) def: Arc<ResourceDef>,
    pub(crate) version: String,
    /// `kind`, `apiVersion` and `metadata` of the list.
    pub(crate) head: Value,
    pub(crate) items: Vec<ListItem>,
}

impl ListPage {
    /// The list as one JSON value (copies every item).
    pub fn into_value(self) -> Value {
        let Self {
            def,
            version,
            mut head,
            items,
        } = self;
        let items = items
            .into_iter()
            .map(|i| i.into_served(&def, &version))
            .collect();
        object::as_map(&mut head).insert("items".into(), Value::Array(items));
        head
    }

    /// The list's JSON, the items' bytes taken from their cached encodings.
    pub fn to_json(&self) -> Vec<u8> {
        let api_version = self.def.api_version(&self.version);
        let mut out = serde_json::to_vec(&self.head).unwrap_or_default();
        // `head` is a non-empty object: replace its closing brace with the items.
        out.pop();
        out.extend_from_slice(b",\"items\":[");
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match item {
                ListItem::Shared(s) => {
                    out.extend_from_slice(&s.encoded.get_or_encode(&api_version, || {
                        encode_served(&self.def, &self.version, &s.value)
                    }))
                }
                ListItem::Served(v) => {
                    // Writing a `Value` into a `Vec` cannot fail (its keys are strings).
                    let _ = serde_json::to_writer(&mut out, v);
                }
            }
        }
        out.extend_from_slice(b"]}");
        out
    }
}

/// A write's answer: the object as stored, shared with the store and its watchers (its JSON
/// encoded once for the answer and every watch event of this version), or a value made for the
/// answer alone (a dry run, a deletion's last state, a review).
#[derive(Debug)]
pub enum Answer {
    /// The stored object, to be served at `version` of `def`.
    Stored {
        /// Its resource type.
        def: Arc<ResourceDef>,
        /// The version the request named.
        version: String,
        /// The object.
        object: Arc<Stored>,
    },
    /// An answer of its own.
    Value(Value),
}

impl Answer {
    pub(crate) fn stored(def: &Arc<ResourceDef>, version: &str, object: Arc<Stored>) -> Self {
        Self::Stored {
            def: Arc::clone(def),
            version: version.to_owned(),
            object,
        }
    }

    /// The answer as served.
    #[must_use]
    pub fn into_value(self) -> Value {
        match self {
            Self::Stored {
                def,
                version,
                object,
            } => served(&def, &version, &object).into_owned(),
            Self::Value(v) => v,
        }
    }

    /// The answer's JSON: a stored object's cached bytes when a LIST or watch encoded them
    /// already (else encoded and cached for them).
    #[must_use]
    pub fn encode(&self) -> Arc<[u8]> {
        match self {
            Self::Stored {
                def,
                version,
                object,
            } => object.encoded.get_or_encode(&def.api_version(version), || {
                encode_served(def, version, object)
            }),
            // Encoding a `Value` into memory cannot fail (its keys are strings).
            Self::Value(v) => serde_json::to_vec(v).unwrap_or_default().into(),
        }
    }
}
