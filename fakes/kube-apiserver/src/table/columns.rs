//! The column definitions every table shares: one column of a type and format, and the
//! `Name` and `Age` columns.

use serde_json::{json, Value};

pub(super) fn col(name: &str, ty: &str, format: &str, priority: i64, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

pub(super) fn name_col() -> Value {
    col(
        "Name",
        "string",
        "name",
        0,
        "Name must be unique within a namespace.",
    )
}

pub(super) fn age_col() -> Value {
    col("Age", "string", "", 0, "CreationTimestamp is a timestamp representing the server time when this object was created.")
}
