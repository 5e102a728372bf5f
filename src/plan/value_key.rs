//! A group key of the value ([`ValueKey`]: `floor(v)`, `floor((v - 200) / 2)`) and how it
//! rounds ([`KeyRounding`]).

use arrow::datatypes::DataType;
use datafusion::logical_expr::Expr;

/// How a [`ValueKey`] rounds its expression's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyRounding {
    /// The result itself (`GROUP BY v`, `GROUP BY v * 2`).
    None,
    Floor,
    Ceil,
    Trunc,
}

impl KeyRounding {
    /// The SQL function of this rounding, `None` for none.
    pub fn function(self) -> Option<&'static str> {
        match self {
            KeyRounding::None => None,
            KeyRounding::Floor => Some("floor"),
            KeyRounding::Ceil => Some("ceil"),
            KeyRounding::Trunc => Some("trunc"),
        }
    }

    /// The rounding of SQL function `name`.
    pub fn of_function(name: &str) -> Option<Self> {
        [KeyRounding::Floor, KeyRounding::Ceil, KeyRounding::Trunc]
            .into_iter()
            .find(|r| r.function() == Some(name))
    }
}

/// A group key of the value (`floor(v)`, `floor((v - 200) / 2)`): `rounding` of
/// expression `expr` of the value column, a float of type `data_type`, NULL where the
/// value is. Each distinct key is a group (as DataFusion groups floats: by their bits,
/// -0.0 as 0.0), alongside the axis keys.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueKey {
    /// Where the key stands among the query's keys (the axis keys keep their order
    /// around it).
    pub position: usize,
    pub rounding: KeyRounding,
    /// The expression rounded (unqualified columns).
    pub expr: Expr,
    /// Output column name of the fold.
    pub name: String,
    pub data_type: DataType,
}

impl ValueKey {
    /// The key's expression as SQL writes it.
    pub fn sql(&self) -> String {
        match self.rounding.function() {
            Some(f) => format!("{f}({})", self.expr),
            None => self.expr.to_string(),
        }
    }
}
