// Package deploytest has no code of its own: its tests keep the deployment artifacts
// (Dockerfile, docker-compose.yml, the kustomize base in deploy/k8s) honest against the
// code they deploy. Nothing here can build an image or start a cluster, so the tests
// parse every manifest and check it against pkg/config (variable names, the embedded
// config file, http.listen), pkg/bus (stream and durable consumer names KEDA scales on)
// and the cmd/ directories, without a network.
package deploytest
