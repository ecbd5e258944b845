// Package logline reads the JSON log lines edgefleet's components write with zap ("ts" as float
// seconds or RFC 3339, "level", "logger", "msg", then key/values) into the parts the log viewer
// shows, and renders them as one line of text. Shared by the web UI and the CLI.
package logline

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Entry is one log line's parts. A line that is not a JSON object has only Raw.
type Entry struct {
	// Time is the line's "ts"; zero when absent or unreadable.
	Time time.Time `json:"time"`
	// Level, Logger and Message are "level", "logger" and "msg".
	Level   string `json:"level,omitempty"`
	Logger  string `json:"logger,omitempty"`
	Message string `json:"message,omitempty"`
	// Fields are the other keys, in the line's order, values as JSON text (strings unquoted).
	Fields []Field `json:"fields,omitempty"`
	// Raw is the line as is when it is not a JSON object.
	Raw string `json:"raw,omitempty"`
}

// Field is one key=value of an entry.
type Field struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// String says Value was a JSON string (rendered quoted when it has spaces or quotes);
	// otherwise it is compact JSON, rendered as is.
	String bool `json:"string,omitempty"`
}

// Parse reads one line. It never fails: a line that is not a JSON object is kept in Raw.
func Parse(line string) Entry {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return Entry{Raw: line}
	}
	var e Entry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Entry{Raw: line}
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Entry{Raw: line}
		}
		var s string
		isString := json.Unmarshal(raw, &s) == nil
		switch {
		case key == "ts":
			e.Time = parseTime(raw, s, isString)
		case key == "level" && isString:
			e.Level = s
		case key == "logger" && isString:
			e.Logger = s
		case key == "msg" && isString:
			e.Message = s
		default:
			v := s
			if !isString {
				v = compact(raw)
			}
			e.Fields = append(e.Fields, Field{Key: key, Value: v, String: isString})
		}
	}
	return e
}

// parseTime reads "ts": RFC 3339 text or seconds since the epoch as a number.
func parseTime(raw json.RawMessage, s string, isString bool) time.Time {
	if isString {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}
		}
		return t
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC()
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// Render is the entry as one line of text: time, level, logger, message, then key=value pairs
// (values with spaces quoted); a line that was not JSON as is.
func (e Entry) Render() string {
	if e.Raw != "" || (e.Time.IsZero() && e.Level == "" && e.Message == "" && len(e.Fields) == 0) {
		return clean(e.Raw)
	}
	parts := make([]string, 0, 4+len(e.Fields))
	if !e.Time.IsZero() {
		parts = append(parts, e.Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
	}
	for _, s := range []string{strings.ToUpper(e.Level), e.Logger, e.Message} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	for _, f := range e.Fields {
		v := f.Value
		if f.String && (v == "" || strings.ContainsAny(v, " \t\n\"=")) {
			v = strconv.Quote(v)
		}
		parts = append(parts, f.Key+"="+v)
	}
	return clean(strings.Join(parts, " "))
}

// clean replaces control characters (a terminal's escape sequences, line breaks) with "?": log lines are
// untrusted text.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
