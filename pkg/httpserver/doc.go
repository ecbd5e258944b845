// Package httpserver runs an http.Handler as a controller-runtime manager runnable, on every
// replica (leader or not), over HTTPS when given a certificate and plain HTTP otherwise, and
// shuts it down gracefully with the manager.
package httpserver
