//! [`Prepare`], what a collection's `prepare` reads (the store before the request, the project,
//! zone or region, the key written and its previous version), and the references it resolves
//! through it: any form a client sends (full URL, partial path, name) normalised to a full URL
//! of an allowed collection that exists, as the Compute API v1 reference accepts them.

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::collections::{collection_of_key, name_of};
use crate::snapshot::{key_in_project, ResourceKey};
use crate::store::State;
use crate::validate::{self, Obj};

/// What a resource's `prepare` needs: read access to the store, where the resource lives, and
/// the previous version on update.
pub struct Prepare<'a> {
    /// The store as it is before this request.
    pub state: &'a State,
    /// Project of the request.
    pub project: &'a str,
    /// Zone of the request for zonal collections; region of the request for regional ones
    /// (the router puts the region here).
    pub zone: Option<&'a str>,
    /// Key of the resource being written.
    pub key: &'a str,
    /// The stored resource this request replaces (update, patch, custom setters).
    pub old: Option<&'a Value>,
    /// Addresses may be allocated from this range (`--address-range`).
    pub address_range: (std::net::Ipv4Addr, u8),
}

impl Prepare<'_> {
    /// The emulator's public base (`http://127.0.0.1:PORT/compute/v1/`).
    pub fn base(&self) -> &str {
        &self.state.base
    }

    /// Full URL of a key.
    pub fn url(&self, key: &str) -> String {
        format!("{}{}", self.state.base, key)
    }

    /// Resolves a reference in `field` (any form clients send) to one of the `allowed`
    /// collections, checks that it exists, and returns it normalised as a full URL.
    ///
    /// Errors: 400 `invalid` naming `field` when the reference is malformed or names another
    /// collection; 404 `notFound` when the resource does not exist (as the real API).
    pub fn reference(
        &self,
        field: &str,
        reference: &str,
        allowed: &[&str],
    ) -> Result<String, ApiError> {
        let key = self.parse_reference(field, reference, allowed)?;
        if !self.state.resources.contains_key(&key) {
            let mut e = ApiError::not_found(&key);
            e.message = format!("{} (referenced by field '{field}')", e.message);
            e.field = Some(field.to_string());
            return Err(e);
        }
        Ok(self.url(&key))
    }

    /// Like [`Prepare::reference`] without the existence check; returns the key.
    pub fn parse_reference(
        &self,
        field: &str,
        reference: &str,
        allowed: &[&str],
    ) -> Result<ResourceKey, ApiError> {
        let malformed = || {
            ApiError::invalid_value(
                field,
                reference,
                &format!(
                    "The URL is malformed; expected a reference to {}.",
                    allowed.join(" or ")
                ),
            )
        };
        let key = key_in_project(self.project, reference).ok_or_else(malformed)?;
        let coll = collection_of_key(&key).ok_or_else(malformed)?;
        if !allowed.contains(&coll.segment) {
            return Err(malformed());
        }
        validate::check_name(field, name_of(&key)).map_err(|_| malformed())?;
        Ok(key)
    }

    /// Normalises the optional reference at `obj[key]` in place.
    pub fn ref_field(
        &self,
        obj: &mut Obj,
        prefix: &str,
        key: &str,
        allowed: &[&str],
    ) -> Result<Option<String>, ApiError> {
        let field = validate::path(prefix, key);
        match validate::opt_str(obj, prefix, key)? {
            None | Some("") => {
                obj.remove(key);
                Ok(None)
            }
            Some(r) => {
                let url = self.reference(&field, r, allowed)?;
                obj.insert(key.to_string(), Value::String(url.clone()));
                Ok(Some(url))
            }
        }
    }

    /// Normalises the list of references at `obj[key]` in place.
    pub fn ref_list(
        &self,
        obj: &mut Obj,
        prefix: &str,
        key: &str,
        allowed: &[&str],
    ) -> Result<Vec<String>, ApiError> {
        let list = validate::str_list(obj, prefix, key)?;
        let mut out = Vec::with_capacity(list.len());
        for (i, r) in list.iter().enumerate() {
            out.push(self.reference(
                &format!("{}[{i}]", validate::path(prefix, key)),
                r,
                allowed,
            )?);
        }
        if obj.contains_key(key) {
            obj.insert(key.to_string(), Value::from(out.clone()));
        }
        Ok(out)
    }
}
