module github.com/libkvreg/libkvreg/bindings/go

go 1.19
