//! Which declared layer a module belongs to: the longest module path in the crate's table
//! that is the module or one of its ancestors.

/// The layer index (0 is the top) of the module `path`, `None` when no entry covers it.
pub fn layer_of(layers: &[&[&str]], path: &[String]) -> Option<usize> {
    let joined = path.join("::");
    let mut best: Option<(usize, usize)> = None;
    for (index, layer) in layers.iter().enumerate() {
        for entry in *layer {
            let covers = joined == *entry || joined.starts_with(&format!("{entry}::"));
            if covers && best.is_none_or(|(len, _)| entry.len() > len) {
                best = Some((entry.len(), index));
            }
        }
    }
    best.map(|(_, index)| index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_entry_wins() {
        let layers: &[&[&str]] = &[&["api"], &["resources::url_maps"], &["resources"]];
        let path = |s: &str| s.split("::").map(String::from).collect::<Vec<_>>();
        assert_eq!(layer_of(layers, &path("api")), Some(0));
        assert_eq!(
            layer_of(layers, &path("resources::url_maps::tests")),
            Some(1)
        );
        assert_eq!(
            layer_of(layers, &path("resources::forwarding_rules")),
            Some(2)
        );
        assert_eq!(layer_of(layers, &path("apis")), None);
    }
}
