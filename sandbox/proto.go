package sandbox

// The protocol between the host and the agent in the container.
//
// Both directions carry frames on one byte stream (the container's stdin, and its
// stdout as demultiplexed from the attach stream):
//
//	type:1 | stream:4 (big endian) | length:4 (big endian) | payload:length
//
// Stream 0 is the connection itself (hello); every command gets a fresh stream id
// chosen by the host. Control payloads are JSON; data payloads are raw bytes. Output
// is flow-controlled per stream by credits, so one slow reader never blocks the
// other commands sharing the connection and neither side buffers without bound.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// protoVersion is bumped on any incompatible change of the frames below.
const protoVersion = 1

// Frame types.
const (
	frameHello  byte = 1 // both ways, stream 0: helloMsg / agentHelloMsg
	frameStart  byte = 2 // host→agent: startMsg, opens a stream
	frameData   byte = 3 // agent→host: command output
	frameExit   byte = 4 // agent→host: exitMsg, closes a stream
	frameInput  byte = 5 // host→agent: bytes for the command's terminal
	frameCredit byte = 6 // both ways: 4-byte count of bytes the sender consumed
	frameResize byte = 7 // host→agent: cols:2 rows:2
	frameStop   byte = 8 // host→agent: stopMsg
)

const (
	headerSize = 9
	// maxPayload bounds every frame; data frames use at most maxChunk.
	maxPayload = 1 << 20
	maxChunk   = 32 << 10
	// outputWindow is how many output bytes of one stream may be in flight
	// (sent by the agent and not yet consumed by the host).
	outputWindow = 256 << 10
	// inputWindow is the same for terminal input of an interactive shell.
	inputWindow = 64 << 10
)

// helloMsg opens the connection: the host tells the agent where it runs.
type helloMsg struct {
	Version   int      `json:"version"`
	Workspace string   `json:"workspace"`
	Env       []string `json:"env"`
}

// agentHelloMsg answers helloMsg.
type agentHelloMsg struct {
	Version int    `json:"version"`
	Shell   string `json:"shell"`
	// InputWait says whether the agent can tell a command blocked on terminal
	// input (it needs /proc/<pid>/syscall).
	InputWait bool `json:"inputWait"`
	// Error is set when the agent cannot serve; it exits after sending it.
	Error string `json:"error,omitempty"`
}

// startMsg starts a command on a new stream.
type startMsg struct {
	Command string `json:"command,omitempty"`
	// Interactive runs a login-less interactive shell instead of Command, with
	// no input-wait detection.
	Interactive bool   `json:"interactive,omitempty"`
	Dir         string `json:"dir"`
	Cols        uint16 `json:"cols"`
	Rows        uint16 `json:"rows"`
	// InputWaitMS ends the command once it has waited that long for terminal
	// input; zero disables the detection.
	InputWaitMS int `json:"inputWaitMs,omitempty"`
}

// exitMsg ends a stream: every data frame of the stream precedes it.
type exitMsg struct {
	ExitCode int    `json:"exitCode"`
	Signal   string `json:"signal,omitempty"`
	// Dir is where the command started; DirReset says the requested directory
	// was missing or outside the workspace.
	Dir      string `json:"dir"`
	DirReset bool   `json:"dirReset,omitempty"`
	// Cwd is the shell's directory when it exited, empty when unknown (exec,
	// a replaced EXIT trap, death by signal).
	Cwd          string    `json:"cwd,omitempty"`
	InputWait    bool      `json:"inputWait,omitempty"`
	OOMKilled    bool      `json:"oomKilled,omitempty"`
	ProcessLimit bool      `json:"processLimit,omitempty"`
	Background   []Process `json:"background,omitempty"`
	// Error is set when the command could not be started at all.
	Error string `json:"error,omitempty"`
}

// stopMsg ends a running command: SIGTERM to its process group now, SIGKILL to
// everything in its session GraceMS later (immediately when zero).
type stopMsg struct {
	GraceMS int `json:"graceMs"`
}

// errProtocol marks a malformed or unexpected frame.
var errProtocol = errors.New("sandbox agent protocol error")

// frame is one decoded frame. Payload is only valid until the next read.
type frame struct {
	typ     byte
	stream  uint32
	payload []byte
}

// frameReader decodes frames from a byte stream, reusing one buffer.
type frameReader struct {
	r   io.Reader
	hdr [headerSize]byte
	buf []byte
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: r, buf: make([]byte, maxChunk)}
}

// next reads one frame. Its payload is overwritten by the next call.
func (fr *frameReader) next() (frame, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[5:])
	if n > maxPayload {
		return frame{}, fmt.Errorf("%w: frame of %d bytes", errProtocol, n)
	}
	if int(n) > cap(fr.buf) {
		fr.buf = make([]byte, n)
	}
	p := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	return frame{typ: fr.hdr[0], stream: binary.BigEndian.Uint32(fr.hdr[1:]), payload: p}, nil
}

// putHeader fills the first headerSize bytes of b.
func putHeader(b []byte, typ byte, stream uint32, n int) {
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:], stream)
	binary.BigEndian.PutUint32(b[5:], uint32(n))
}

// appendFrame appends one encoded frame to b.
func appendFrame(b []byte, typ byte, stream uint32, payload []byte) []byte {
	var h [headerSize]byte
	putHeader(h[:], typ, stream, len(payload))
	b = append(b, h[:]...)
	return append(b, payload...)
}

// jsonFrame encodes a control frame.
func jsonFrame(typ byte, stream uint32, v any) []byte {
	p, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own message types are encoded
	}
	return appendFrame(make([]byte, 0, headerSize+len(p)), typ, stream, p)
}

// creditFrame encodes a credit of n bytes.
func creditFrame(stream uint32, n int) []byte {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(n))
	return appendFrame(make([]byte, 0, headerSize+4), frameCredit, stream, p[:])
}

// parseCredit decodes a credit payload.
func parseCredit(p []byte) (int, error) {
	if len(p) != 4 {
		return 0, fmt.Errorf("%w: credit of %d bytes", errProtocol, len(p))
	}
	return int(binary.BigEndian.Uint32(p)), nil
}

// resizeFrame encodes a window size change.
func resizeFrame(stream uint32, cols, rows uint16) []byte {
	var p [4]byte
	binary.BigEndian.PutUint16(p[0:], cols)
	binary.BigEndian.PutUint16(p[2:], rows)
	return appendFrame(make([]byte, 0, headerSize+4), frameResize, stream, p[:])
}

// parseResize decodes a resize payload.
func parseResize(p []byte) (cols, rows uint16, err error) {
	if len(p) != 4 {
		return 0, 0, fmt.Errorf("%w: resize of %d bytes", errProtocol, len(p))
	}
	return binary.BigEndian.Uint16(p[0:]), binary.BigEndian.Uint16(p[2:]), nil
}
