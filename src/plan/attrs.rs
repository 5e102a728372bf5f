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

/// The field metadata key that marks an axis column; its value is the axis' position among
/// the table's dimensions ("0", "1", ...). It lets a consumer of the rows (Python's
/// `to_xarray`) pivot them back into an array; the other keys are CF attributes.
pub const AXIS_KEY: &str = "tet:axis";

/// An axis column's field metadata: its attributes and its position ([`AXIS_KEY`]).
pub fn axis_metadata(position: usize, attrs: &BTreeMap<String, String>) -> HashMap<String, String> {
    let mut metadata = field_metadata(attrs);
    metadata.insert(AXIS_KEY.to_string(), position.to_string());
    metadata
}

/// Attributes as Arrow field metadata.
pub fn field_metadata(attrs: &BTreeMap<String, String>) -> HashMap<String, String> {
    attrs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}
