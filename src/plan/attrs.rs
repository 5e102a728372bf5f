//! CF attributes as Arrow field metadata: what describes a column, not how its values were
//! stored (xarray's split of `attrs` and `encoding`).

use std::collections::{BTreeMap, HashMap};

/// `attrs` without the keys in `applied`.
pub fn without(attrs: &BTreeMap<String, String>, applied: &[&str]) -> BTreeMap<String, String> {
    attrs
        .iter()
        .filter(|(k, _)| !applied.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Attributes as Arrow field metadata.
pub fn field_metadata(attrs: &BTreeMap<String, String>) -> HashMap<String, String> {
    attrs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}
