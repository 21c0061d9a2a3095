package main

import (
	"os"
	"testing"

	"github.com/goredisson/ratelimiter/internal/redistest"
)

var redisAddr string

func TestMain(m *testing.M) { os.Exit(redistest.Main(m, &redisAddr, nil)) }
