// Command argocd-health runs an Argo CD health customization (Lua) on Kubernetes objects the
// way Argo CD v3.6.1 does (util/lua/lua.go:132-247): gopher-lua at the version Argo CD requires,
// the package, base and table libraries only, the object decoded into the global `obj`, a one
// second limit, and the returned table encoded with gopher-json into {status, message}.
// Argo CD itself needs a newer Go than this machine has, so its few lines of glue are restated.
//
//	argocd-health SCRIPT.lua OBJECTS.json   # prints one {"status","message"} per object, as JSON
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

type healthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

func evaluate(script string, object json.RawMessage) (healthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true},
			lua.LString(lib.name)); err != nil {
			return healthStatus{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	value, err := luajson.Decode(l, object)
	if err != nil {
		return healthStatus{}, err
	}
	l.SetGlobal("obj", value)
	if err := l.DoString(script); err != nil {
		return healthStatus{}, err
	}
	result := l.Get(-1)
	if result.Type() != lua.LTTable {
		return healthStatus{}, fmt.Errorf("the script returned %s, not a table", result.Type())
	}
	encoded, err := luajson.Encode(result)
	if err != nil {
		return healthStatus{}, err
	}
	var out healthStatus
	err = json.Unmarshal(encoded, &out)
	return out, err
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health SCRIPT.lua OBJECTS.json")
		os.Exit(2)
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var objects []json.RawMessage
	if err := json.Unmarshal(data, &objects); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	results := make([]healthStatus, 0, len(objects))
	for _, object := range objects {
		status, err := evaluate(string(script), object)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		results = append(results, status)
	}
	out, _ := json.Marshal(results)
	fmt.Println(string(out))
}
