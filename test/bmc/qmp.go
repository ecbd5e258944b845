package bmc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// qmp is a connection to a qemu's QMP socket (the QEMU Machine Protocol: JSON commands and
// answers, and asynchronous events, one object a line). qemu serves one connection at a time,
// so the VM holds its lock while it uses one.
type qmp struct {
	conn    net.Conn
	dec     *json.Decoder
	timeout time.Duration
	events  []string // names of the events read while waiting for answers
}

// qmpMessage is any message qemu sends: a greeting, an answer, an error or an event.
type qmpMessage struct {
	QMP    json.RawMessage `json:"QMP"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
}

// dialQMP connects to the socket, reads qemu's greeting and leaves the capabilities negotiation
// mode; each exchange after that has timeout.
func dialQMP(socket string, timeout time.Duration) (*qmp, error) {
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", socket, err)
	}
	q := &qmp{conn: conn, dec: json.NewDecoder(conn), timeout: timeout}
	if err := q.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		conn.Close()
		return nil, err
	}
	var greeting qmpMessage
	if err := q.dec.Decode(&greeting); err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp %s: no greeting: %w", socket, err)
	}
	if greeting.QMP == nil {
		conn.Close()
		return nil, fmt.Errorf("qmp %s: no greeting", socket)
	}
	if err := q.run("qmp_capabilities", nil, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

// run executes a command with args (nil: none) and decodes its answer into out (nil: ignored).
func (q *qmp) run(command string, args, out any) error {
	if err := q.conn.SetDeadline(time.Now().Add(q.timeout)); err != nil {
		return err
	}
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	if err := json.NewEncoder(q.conn).Encode(req); err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	for {
		var m qmpMessage
		if err := q.dec.Decode(&m); err != nil {
			return fmt.Errorf("qmp %s: %w", command, err)
		}
		switch {
		case m.Event != "":
			q.events = append(q.events, m.Event)
		case m.Error != nil:
			return fmt.Errorf("qmp %s: %s: %s", command, m.Error.Class, m.Error.Desc)
		case m.Return != nil:
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(m.Return, out); err != nil {
				return fmt.Errorf("qmp %s: answer %s: %w", command, m.Return, err)
			}
			return nil
		}
	}
}

// waitEvent waits for an event named name, counting those read while waiting for answers.
func (q *qmp) waitEvent(name string) error {
	for _, e := range q.events {
		if e == name {
			return nil
		}
	}
	if err := q.conn.SetDeadline(time.Now().Add(q.timeout)); err != nil {
		return err
	}
	for {
		var m qmpMessage
		if err := q.dec.Decode(&m); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("qmp: no %s event within %s", name, q.timeout)
			}
			return fmt.Errorf("qmp: waiting for %s: %w", name, err)
		}
		if m.Event == name {
			return nil
		}
	}
}

func (q *qmp) close() error { return q.conn.Close() }
