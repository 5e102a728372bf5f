//! The storage classes of an archive: its files grouped by how they store the value
//! columns, each group an archive of its own whose files one decoding serves (what the
//! fold needs to accumulate their stored values together).

use super::archive::combine;
use super::table::TableModel;
use datafusion::common::Result;

impl TableModel {
    /// This table's files grouped by how they store each value column
    /// ([`TableModel::stores_alike`]), each group as the archive of its files along this
    /// table's concatenation axis, in the order of each group's first file. A class keeps
    /// this table's limits (its files have its missing rule already). Its value columns
    /// have its files' own types, which may be narrower than the archive's (a float32
    /// class in a Float64 archive). A table whose files store alike is its own one class.
    pub fn storage_classes(&self) -> Result<Vec<TableModel>> {
        let Some(files) = self.files.as_ref().filter(|f| !f.uniform) else {
            return Ok(vec![self.clone()]);
        };
        let mut classes: Vec<Vec<TableModel>> = Vec::new();
        for m in &files.members {
            let member = TableModel::clone(&m.table);
            match classes.iter_mut().find(|c| c[0].stores_alike(&member)) {
                Some(class) => class.push(member),
                None => classes.push(vec![member]),
            }
        }
        let axis = &self.axes[files.axis].name;
        classes
            .into_iter()
            .map(|members| {
                let mut class = combine(&files.pattern, members, Some(axis))?;
                class.limits = self.limits;
                Ok(class)
            })
            .collect()
    }
}
