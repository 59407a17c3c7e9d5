package proto

import (
	"encoding/binary"
	"fmt"
)

// Relayed network connections (egress).
//
// When the host sends NetListen after the hello, the agent listens on the
// loopback addresses it names inside the sandbox (the sandbox has no other
// network) and answers NetListen with the error, if any. Each connection a
// command makes to one of them is a stream the agent opens with NetOpen, under
// an id with NetStreamBit set (the host's ids never have it, so the two never
// meet). Its bytes go both ways in NetData frames, each way with at most
// a window of bytes in flight: the receiver sends NetCredit as its reader
// consumes them. NetEnd says its sender sends no more data (NetEOF, a
// half-close) or is gone altogether (NetClose).
//
// Where the host offers a Unix socket of its proxy (NetListenMsg.Socket), the
// agent connects to it once, before it answers NetListen, and the host takes
// no other connection there. Under PassFD the agent sends on that connection,
// for each connection a command makes, one byte naming the listener
// (NetSocketHTTP, NetSocketSOCKS) with the connection's descriptor
// (SCM_RIGHTS); else that connection carries the frames above (NetOpen,
// NetData, NetCredit, NetEnd) in place of the stream. Either way the stream
// carries none of their bytes; when the socket connection fails, the agent
// relays later connections over the stream.
const (
	NetListen Type = 16 // host→agent, stream 0: NetListenMsg; answered with the same type
	NetOpen   Type = 17 // agent→host: NetOpenMsg, opens a stream
	NetData   Type = 18 // both ways: bytes of a relayed connection
	NetCredit Type = 19 // both ways: 4-byte count of NetData bytes consumed
	NetEnd    Type = 20 // both ways: one byte, NetEOF or NetClose
)

// NetStreamBit is set in the id of every stream the agent opens.
const NetStreamBit = 1 << 31

// Payloads of NetEnd.
const (
	NetEOF   byte = 0
	NetClose byte = 1
)

// NetListenMsg asks the agent to listen (host→agent), and answers (agent→host,
// with Error set when it could not).
type NetListenMsg struct {
	// HTTP is the address of the HTTP proxy's listener, "127.0.0.1:3128".
	HTTP string `json:"http,omitempty"`
	// SOCKS is the address of the SOCKS5 proxy's listener.
	SOCKS string `json:"socks,omitempty"`
	// Socket, when set, is the path inside the sandbox of a Unix socket of
	// the host's, a second data path beside this stream (see above). The
	// agent answers with SocketError set when it cannot connect to it, and
	// then relays every connection over this stream.
	Socket string `json:"socket,omitempty"`
	// PassFD asks the agent to hand each connection's descriptor over the
	// socket rather than relay its bytes (where the sandbox's sockets are
	// the host kernel's: runc, not gVisor).
	PassFD      bool   `json:"pass_fd,omitempty"`
	SocketError string `json:"socket_error,omitempty"`
	Error       string `json:"error,omitempty"`
}

// The byte that comes with a descriptor under PassFD: which listener accepted
// the connection.
const (
	NetSocketHTTP  byte = 'h'
	NetSocketSOCKS byte = 's'
)

// NetOpenMsg opens a relayed connection.
type NetOpenMsg struct {
	// Listener is "http" or "socks": which listener accepted the connection.
	Listener string `json:"listener"`
}

// NetCreditFrame encodes a credit of n bytes for a relayed connection.
func NetCreditFrame(stream uint32, n int) []byte {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], uint32(n))
	return AppendFrame(make([]byte, 0, HeaderSize+4), NetCredit, stream, p[:])
}

// NetEndFrame encodes the end of a relayed connection's data (close false) or
// of the connection (close true).
func NetEndFrame(stream uint32, close bool) []byte {
	b := NetEOF
	if close {
		b = NetClose
	}
	return AppendFrame(make([]byte, 0, HeaderSize+1), NetEnd, stream, []byte{b})
}

// ParseNetEnd decodes a NetEnd payload: true for NetClose.
func ParseNetEnd(p []byte) (bool, error) {
	if len(p) != 1 || p[0] > NetClose {
		return false, fmt.Errorf("%w: net end of %d bytes", ErrProtocol, len(p))
	}
	return p[0] == NetClose, nil
}
