//! Every page of a list call: one loop on `pageToken` / `nextPageToken` for all of the seam's
//! lists (Compute API v1, "Pagination": a list answers at most `maxResults` items, 500 by
//! default, and a `nextPageToken` while more remain; the next call sends it as `pageToken`).
//!
//! google-cloud-compute-v1's own paginator (`by_page()` on a list builder) fetches every page
//! itself, past the seam's `read` (rate pacing, retries, one metric per call), and covers only
//! the plain lists (not `aggregatedList`, nor `listNetworkEndpoints`); so the seam keeps the loop
//! and sends each page through `read`.

use std::future::Future;

use super::{Compute, Result};

impl Compute {
    /// Every item of a paged list: `fetch(token)` sends one page's call (`""` for the first
    /// page), each through [`Compute::read`] as `method` on `label` (the metric and log
    /// fields); `split` takes a page apart into its items and its `nextPageToken` (absent or
    /// empty on the last page). Items come in the API's order.
    ///
    /// Errors: the first page call that fails after the seam's retries.
    pub(super) async fn paginate<P, T, F, Fut>(
        &self,
        method: &'static str,
        label: &str,
        fetch: F,
        split: impl Fn(P) -> (Vec<T>, Option<String>),
    ) -> Result<Vec<T>>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = std::result::Result<P, google_cloud_gax::error::Error>>,
    {
        let mut items = Vec::new();
        let mut token = String::new();
        loop {
            let page = self.read(method, label, || fetch(token.clone())).await?;
            let (page_items, next) = split(page);
            items.extend(page_items);
            match next {
                Some(t) if !t.is_empty() => token = t,
                _ => return Ok(items),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};
    use wiremock::matchers::{method, path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::super::test_support::compute_for;

    /// `verb at` answers `first` (with `nextPageToken: t2`), then `second` for `pageToken=t2`.
    async fn two_pages(server: &MockServer, verb: &str, at: &str, first: Value, second: Value) {
        Mock::given(method(verb))
            .and(path(at))
            .and(query_param("pageToken", "t2"))
            .respond_with(ResponseTemplate::new(200).set_body_json(second))
            .with_priority(1)
            .expect(1)
            .mount(server)
            .await;
        let mut first = first;
        first["nextPageToken"] = json!("t2");
        Mock::given(method(verb))
            .and(path(at))
            .respond_with(ResponseTemplate::new(200).set_body_json(first))
            .expect(1)
            .mount(server)
            .await;
    }

    #[tokio::test]
    async fn the_neg_lists_follow_page_tokens_through_the_seam() {
        let server = MockServer::start().await;
        two_pages(
            &server,
            "GET",
            "/compute/v1/projects/p1/aggregated/networkEndpointGroups",
            json!({"items": {"zones/z2": {"networkEndpointGroups": [{"name": "b"}]}}}),
            json!({"items": {"zones/z1": {"networkEndpointGroups": [{"name": "a"}]},
                "regions/r1": {}}}),
        )
        .await;
        two_pages(
            &server,
            "POST",
            "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/a/listNetworkEndpoints",
            json!({"items": [{"networkEndpoint": {"ipAddress": "10.0.0.1", "port": 80}}]}),
            json!({"items": [{"networkEndpoint": {"ipAddress": "10.0.0.2", "port": 80}}]}),
        )
        .await;
        let compute = compute_for(&server).await;
        let negs: Vec<(String, String)> = compute
            .aggregated_list_network_endpoint_groups()
            .await
            .unwrap()
            .into_iter()
            .map(|(zone, neg)| (zone, neg.name.unwrap_or_default()))
            .collect();
        assert_eq!(negs, [("z1".into(), "a".into()), ("z2".into(), "b".into())]);
        let ips: Vec<String> = compute
            .list_network_endpoints("z1", "a")
            .await
            .unwrap()
            .into_iter()
            .filter_map(|e| e.network_endpoint?.ip_address)
            .collect();
        assert_eq!(ips, ["10.0.0.1", "10.0.0.2"]);
        // Each page is one call through the seam, counted.
        let m = compute.metrics();
        assert_eq!(
            m.count("compute.networkEndpointGroups.aggregatedList", "ok"),
            2
        );
        assert_eq!(
            m.count("compute.networkEndpointGroups.listNetworkEndpoints", "ok"),
            2
        );
    }
}
