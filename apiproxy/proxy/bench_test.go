package proxy

import (
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkForward measures what the proxy costs a host's clients of the API servers, against
// an anchor run in the same process: the same work on a direct loopback connection to the same
// echo server. "stream" sends 64 KiB writes and reads them back on one kept connection (a
// kubelet's watches and list answers); "connect" opens a connection and makes one round trip
// per operation (a client connecting again after its API server went away).
func BenchmarkForward(b *testing.B) {
	backend := tcpServer(b, echo)
	opts := DefaultOptions()
	opts.HealthInterval = time.Hour
	opts.Backends = []string{backend}
	proxied, _ := serve(b, opts, nil)

	for _, target := range []struct{ name, addr string }{{"anchor-direct", backend}, {"proxied", proxied}} {
		b.Run("stream/"+target.name, func(b *testing.B) {
			conn, err := net.Dial("tcp", target.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			buf, back := make([]byte, 64<<10), make([]byte, 64<<10)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if _, err := conn.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, back); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("connect/"+target.name, func(b *testing.B) {
			one := []byte{1}
			for b.Loop() {
				conn, err := net.Dial("tcp", target.addr)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := conn.Write(one); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, one); err != nil {
					b.Fatal(err)
				}
				_ = conn.Close()
			}
		})
	}
}
