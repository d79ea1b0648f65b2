// Package deploy holds no product code: it is the ops pack (the Grafana
// dashboard, the Prometheus rules and scrape config, the compose cluster
// and the Kubernetes manifests, in the folders beside this file) and the
// tests that hold it to venn: every query names a metric venn exports,
// every rule has a promtool test, every mounted config passes venn's own
// validation, every probe asks an endpoint venn serves. The heavy
// libraries those tests decode with (compose-go, k8s.io/api, the PromQL
// parser) are dependencies of this package's tests only.
package deploy
