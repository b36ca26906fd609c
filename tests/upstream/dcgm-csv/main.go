// Command dcgm-csv reads dcgm-exporter counters files the way dcgm-exporter 4.6.0 does at start
// (tag 4.4.1-4.6.0, internal/pkg/counters/counter_config.go): Go's encoding/csv with '#'
// comments and its default record-length rule (every record as long as the first; ReadCSVFile,
// lines 77-90), then ExtractCounters (lines 92-140): spaces trimmed from each field, exactly
// three fields, a Prometheus type from variables.go:23-29, a DCGM_FI_ field or one of the
// exporter's own counters (exporter_counters.go, const.go:25-28).
//
// dcgm-exporter's own packages are internal and its module is not served by the Go module
// proxy, so these few rules are restated here; the CSV parsing itself is the standard library's.
// Exit 0 when every file is accepted, 1 when the exporter would refuse one, 2 on usage errors.
package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strings"
)

var promTypes = map[string]bool{"gauge": true, "counter": true, "histogram": true, "summary": true, "label": true}

var exporterCounters = map[string]bool{
	"DCGM_EXP_CLOCK_EVENTS_COUNT": true, "DCGM_EXP_XID_ERRORS_COUNT": true,
	"DCGM_EXP_GPU_HEALTH_STATUS": true, "DCGM_EXP_P2P_STATUS": true,
}

func check(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	r := csv.NewReader(file)
	r.Comment = '#'
	records, err := r.ReadAll()
	if err != nil {
		return err
	}
	for i, record := range records {
		if len(record) == 0 {
			continue
		}
		for j, field := range record {
			record[j] = strings.Trim(field, " ")
		}
		if len(record) != 3 {
			return fmt.Errorf("malformed CSV record; err: failed to parse line %d (`%v`), expected 3 fields", i, record)
		}
		if !strings.HasPrefix(record[0], "DCGM_FI_") && !exporterCounters[record[0]] {
			return fmt.Errorf("could not find DCGM field; err: unknown ExporterCounter field '%s'", record[0])
		}
		if !promTypes[record[1]] {
			return fmt.Errorf("could not find Prometheus metric type '%s'", record[1])
		}
	}
	return nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dcgm-csv COUNTERS.csv...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Printf("%s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
