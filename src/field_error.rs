//! The one error that names a field: `{field, message}`, where `field` is the path of
//! what was wrong as the caller wrote it (`message.parts[0].text`, `requestedSchema.type`,
//! `principal`; empty for the whole document) and `message` says what was wrong with it.
//! Identifiers, wire documents, elicitation schemas and the plane's rules all report
//! through it, so each layer passes it on instead of copying it into a type of its own.
//! A leaf: it depends on nothing in the crate.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The JSON path of the offending member; empty for the whole document.
    pub field: String,
    /// What was wrong, for a person.
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error seen from the document that holds it under `prefix`: the field
    /// `role` of `message` becomes `message.role`; an error about the whole held value
    /// (no field) becomes one about `prefix`.
    pub fn within(self, prefix: &str) -> Self {
        let field = if self.field.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}.{}", self.field)
        };
        FieldError { field, ..self }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "invalid `{}`: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for FieldError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_error_seen_from_its_container_names_the_whole_path() {
        let e = FieldError::new("text", "is required");
        assert_eq!(e.clone().within("parts[0]").field, "parts[0].text");
        assert_eq!(
            FieldError::new("", "x").within("parts[1]").field,
            "parts[1]"
        );
        assert_eq!(e.to_string(), "invalid `text`: is required");
    }
}
