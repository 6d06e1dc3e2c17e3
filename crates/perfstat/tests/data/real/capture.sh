#!/bin/sh
# Captures the real `perf stat` outputs in this directory (perf 6.1, 2 CPUs, software events
# only: the machine they were taken on has no hardware PMU). Needs root for -a.
# Run from this directory: sh capture.sh
set -e
E=task-clock,context-switches,page-faults
W="sleep 0.15"
cap() { name=$1; shift; perf stat "$@" -- $W 2> "$name"; }

cap std_global.txt -e $E,cpu-migrations
cap std_not_supported.txt -e cycles,instructions,task-clock
cap std_interval.txt -I 50 -e $E
cap std_per_cpu.txt -A -a -e $E
cap std_interval_per_cpu.txt -I 100 -A -a -e $E
cap std_per_core.txt --per-core -a -e $E
cap std_per_socket.txt --per-socket -a -e $E
cap std_per_die.txt --per-die -a -e $E
cap std_per_node.txt --per-node -a -e $E
cap std_interval_per_core.txt -I 100 --per-core -a -e $E
cap std_duration.txt -a -e duration_time,$E
cap std_tools.txt -e user_time,system_time,$E
cap std_repeat.txt -r 3 -e $E
cap std_groups.txt -e '{task-clock,page-faults},{page-faults,context-switches}'
cap std_modifiers.txt -e page-faults:u,page-faults:k,task-clock:u
cap std_msr.txt -a -e msr/tsc/,task-clock
cap std_interval_msr.txt -I 100 -a -e '{msr/tsc/,page-faults},duration_time'
perf stat -o std_output_file.txt -e $E -- $W
# --per-thread: a busy shell loop started here, so that only its own threads are listed.
busy() { sh -c 'i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done' & BUSY=$!; }
busy; perf stat --per-thread -p $BUSY -e task-clock,page-faults -- sleep 0.15 2> std_per_thread.txt; kill $BUSY

cap csv_global.txt -x, -e $E
cap csv_not_supported.txt -x, -e cycles,instructions,dummy
cap csv_interval.txt -x, -I 100 -e $E
cap csv_per_cpu.txt -x, -A -a -e $E
cap csv_per_core.txt -x, --per-core -a -e $E
cap csv_per_socket.txt -x, --per-socket -a -e $E
cap csv_semicolon_interval_per_core.txt '-x;' -I 100 --per-core -a -e $E
cap csv_tools.txt -x, -e duration_time,user_time,$E
cap csv_repeat.txt -x, -r 2 -e $E
cap csv_msr.txt -x, -a -e msr/tsc/,task-clock
busy; perf stat -x, --per-thread -p $BUSY -e task-clock,page-faults -- sleep 0.15 2> csv_per_thread.txt; kill $BUSY

cap json_global.txt -j -e $E
cap json_not_supported.txt -j -e cycles,dummy
cap json_interval.txt -j -I 100 -e $E
cap json_per_cpu.txt -j -A -a -e $E
cap json_per_core.txt -j --per-core -a -e $E
cap json_per_socket.txt -j --per-socket -a -e $E
cap json_duration.txt -j -e duration_time,$E
cap json_repeat.txt -j -r 2 -e $E
cap json_interval_per_cpu.txt -j -I 100 -A -a -e $E
busy; perf stat -j --per-thread -p $BUSY -e task-clock,page-faults -- sleep 0.15 2> json_per_thread.txt; kill $BUSY
