// Go fasthttp hello-world, the native reference for the HTTP benchmark.
//
//	GOMAXPROCS=1 ./fasthttp-bench -addr 127.0.0.1:8080
//
// Routes: GET / (text), GET /json (JSON), GET /user/{id} (text).
package main

import (
	"encoding/json"
	"flag"
	"log"
	"strconv"

	"github.com/valyala/fasthttp"
)

var (
	hello    = []byte("Hello, world!")
	textType = "text/plain; charset=utf-8"
)

type message struct {
	Message string `json:"message"`
}

func handler(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	switch {
	case string(path) == "/":
		ctx.SetContentType(textType)
		ctx.SetBody(hello)
	case string(path) == "/json":
		body, _ := json.Marshal(message{Message: "Hello, world!"})
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	case len(path) > 6 && string(path[:6]) == "/user/":
		id, err := strconv.Atoi(string(path[6:]))
		if err != nil {
			ctx.Error("Not Found", fasthttp.StatusNotFound)
			return
		}
		ctx.SetContentType(textType)
		ctx.SetBodyString("user " + strconv.Itoa(id))
	default:
		ctx.Error("Not Found", fasthttp.StatusNotFound)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	s := &fasthttp.Server{Handler: handler, Name: "fasthttp"}
	if err := s.ListenAndServe(*addr); err != nil {
		log.Fatal(err)
	}
}
