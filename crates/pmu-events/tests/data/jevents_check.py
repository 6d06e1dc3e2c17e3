#!/usr/bin/env python3
"""Prints what perf's jevents.py makes of the events and metrics of some model directories.

Used by crates/pmu-events/tests/vendor.rs to cross-check the Rust loader. One JSON array per line:
  ["E", table, file, index, name, pmu, event, desc, long_desc, scale_unit, perpkg, deprecated, compat]
  ["M", table, file, index, name, pmu, expr, threshold, groups, scale_unit, constraint, no_group,
        default_group, compat, aggr_mode, desc, long_desc]
Descriptions are as jevents.py stores them (trailing period removed, notes appended, C escapes).

With --jevents DIR the real JsonEvent class of DIR/jevents.py is used (expr is then null, since
jevents simplifies expressions). Without it, a small re-implementation written from reading
jevents.py (Linux 6.12) is used, so the check also runs where no kernel source is at hand.
"""
import argparse
import json
import os
import sys


def removesuffix(s, suffix):
    return s[0:-len(suffix)] if s.endswith(suffix) else s


def fixdesc(s):
    if s is None:
        return None
    return removesuffix(removesuffix(removesuffix(s, '.  '), '. '), '.').replace(
        '\n', '\\n').replace('"', '\\"').replace('\r', '\\r')


UNIT_TABLE = {
    'CBO': 'uncore_cbox', 'QPI LL': 'uncore_qpi', 'SBO': 'uncore_sbox', 'iMPH-U': 'uncore_arb',
    'CPU-M-CF': 'cpum_cf', 'CPU-M-SF': 'cpum_sf', 'PAI-CRYPTO': 'pai_crypto', 'PAI-EXT': 'pai_ext',
    'UPI LL': 'uncore_upi', 'hisi_sicl,cpa': 'hisi_sicl,cpa', 'hisi_sccl,ddrc': 'hisi_sccl,ddrc',
    'hisi_sccl,hha': 'hisi_sccl,hha', 'hisi_sccl,l3c': 'hisi_sccl,l3c', 'imx8_ddr': 'imx8_ddr',
    'imx9_ddr': 'imx9_ddr', 'L3PMC': 'amd_l3', 'DFPMC': 'amd_df', 'UMCPMC': 'amd_umc',
    'cpu_core': 'cpu_core', 'cpu_atom': 'cpu_atom', 'ali_drw': 'ali_drw', 'arm_cmn': 'arm_cmn',
}

FIXED = {
    'inst_retired.any': 'event=0xc0,period=2000003',
    'inst_retired.any_p': 'event=0xc0,period=2000003',
    'cpu_clk_unhalted.ref': 'event=0x0,umask=0x03,period=2000003',
    'cpu_clk_unhalted.thread': 'event=0x3c,period=2000003',
    'cpu_clk_unhalted.core': 'event=0x3c,period=2000003',
    'cpu_clk_unhalted.thread_any': 'event=0x3c,any=1,period=2000003',
}

FIELDS = [('AnyThread', 'any='), ('PortMask', 'ch_mask='), ('CounterMask', 'cmask='),
          ('EdgeDetect', 'edge='), ('FCMask', 'fc_mask='), ('Invert', 'inv='),
          ('SampleAfterValue', 'period='), ('UMask', 'umask='), ('NodeType', 'type='),
          ('RdWrMask', 'rdwrmask='), ('EnAllCores', 'enallcores='), ('EnAllSlices', 'enallslices='),
          ('SliceId', 'sliceid='), ('ThreadMask', 'threadmask=')]

MSR = {0x3F6: 'ldlat=', 0x1A6: 'offcore_rsp=', 0x1A7: 'offcore_rsp=', 0x3F7: 'frontend='}
CONSTRAINT = {'NO_GROUP_EVENTS': '1', 'NO_GROUP_EVENTS_NMI': '2', 'NO_NMI_WATCHDOG': '2',
              'NO_GROUP_EVENTS_SMT': '3'}
AGGR = {'PerChip': '1', 'PerCore': '2'}

_std = {}


class MiniEvent:
    """The attributes of jevents.py's JsonEvent that the loader reproduces."""

    def __init__(self, jd):
        def llx(x):
            return str(x) if 0 <= x < 10 else hex(x)

        def num(v, base):
            return int(v, base)

        eventcode = 0
        if 'EventCode' in jd:
            eventcode = num(jd['EventCode'].split(',', 1)[0], 0)
        if 'ExtSel' in jd:
            eventcode |= int(jd['ExtSel']) << 8
        self.name = jd['EventName'].lower() if 'EventName' in jd else None
        self.topic = ''
        self.compat = jd.get('Compat')
        self.desc = fixdesc(jd.get('BriefDescription'))
        self.long_desc = fixdesc(jd.get('PublicDescription'))
        precise = jd.get('PEBS')
        msr = MSR[int(jd['MSRIndex'].split(',', 1)[0], 0)] if jd.get('MSRIndex') else None
        msrval = jd.get('MSRValue')
        extra = ''
        if 'Data_LA' in jd:
            extra += '  Supports address when precise'
            if 'Errata' in jd:
                extra += '.'
        if 'Errata' in jd:
            extra += '  Spec update: ' + jd['Errata']
        unit = jd.get('Unit')
        self.pmu = 'default_core' if not unit else UNIT_TABLE.get(unit, 'uncore_' + unit.lower())
        self.unit = jd.get('ScaleUnit')
        self.perpkg = jd.get('PerPkg')
        self.aggr_mode = AGGR[jd['AggregationMode']] if jd.get('AggregationMode') else None
        self.deprecated = jd.get('Deprecated')
        self.metric_name = jd.get('MetricName')
        self.metric_group = jd.get('MetricGroup')
        self.metricgroup_no_group = jd.get('MetricgroupNoGroup')
        self.default_metricgroup_name = jd.get('DefaultMetricgroupName')
        self.event_grouping = CONSTRAINT[jd['MetricConstraint']] if jd.get('MetricConstraint') else None
        self.metric_expr = jd.get('MetricExpr')
        self.metric_threshold = jd.get('MetricThreshold')
        if precise and self.desc and '(Precise Event)' not in self.desc:
            extra += ' (Must be precise)' if precise == '2' else ' (Precise event)'
        if 'ConfigCode' in jd:
            event = 'config=' + llx(num(jd['ConfigCode'], 0))
        elif 'EventidCode' in jd:
            event = 'eventid=' + llx(num(jd['EventidCode'], 0))
        else:
            event = 'event=' + llx(eventcode)
        for key, term in FIELDS:
            if key in jd:
                v = jd[key]
                n = int(v, 16) if v.startswith('0x') else int(v)
                if n != 0:
                    event += ',' + term + (llx(n) if v.startswith('0x') else str(n))
        if jd.get('Filter'):
            event += ',' + jd['Filter']
        if msr:
            event += f',{msr}{msrval}'
        if self.desc and extra:
            self.desc += extra
        if self.long_desc and extra:
            self.long_desc += extra
        arch_std = jd.get('ArchStdEvent')
        if arch_std:
            std = _std[arch_std.lower()]
            event = std.event
            for attr, value in std.__dict__.items():
                if hasattr(self, attr) and not getattr(self, attr):
                    setattr(self, attr, value)
        self.event = FIXED.get(self.name, event) if self.name else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tree', required=True, help='pmu-events/arch')
    ap.add_argument('--jevents', help='directory holding jevents.py and metric.py')
    ap.add_argument('models', nargs='+', help='table paths such as x86/sapphirerapids')
    args = ap.parse_args()
    if args.jevents:
        sys.path.insert(0, args.jevents)
        import jevents

        def read(path):
            return json.load(open(path), object_hook=jevents.JsonEvent)

        def preprocess(arch_path):
            jevents._arch_std_events.clear()
            jevents.preprocess_arch_std_files(arch_path)
    else:
        def read(path):
            return [MiniEvent(o) for o in json.load(open(path))]

        def preprocess(arch_path):
            _std.clear()
            for item in sorted(os.scandir(arch_path), key=lambda e: e.name):
                if item.is_file() and item.name.endswith('.json'):
                    for e in read(item.path):
                        if e.name:
                            _std[e.name.lower()] = e
                        if e.metric_name:
                            _std[e.metric_name.lower()] = e

    out = sys.stdout
    for model in args.models:
        arch = model.split('/', 1)[0]
        preprocess(os.path.join(args.tree, arch))
        model_dir = os.path.join(args.tree, model)
        for fname in sorted(os.listdir(model_dir)):
            if not fname.endswith('.json') or fname.endswith('metricgroups.json') or fname == 'counter.json':
                continue
            rel = f'{model}/{fname}'
            for index, e in enumerate(read(os.path.join(model_dir, fname))):
                if e.name:
                    out.write(json.dumps(['E', model, rel, index, e.name, e.pmu, e.event, e.desc,
                                          e.long_desc, e.unit, e.perpkg == '1', e.deprecated == '1',
                                          e.compat]) + '\n')
                if e.metric_name:
                    expr = e.metric_expr if isinstance(e.metric_expr, str) else None
                    groups = ';'.join(g for g in (e.metric_group or '').split(';') if g)
                    no_group = ';'.join(g for g in (e.metricgroup_no_group or '').split(';') if g)
                    out.write(json.dumps(['M', model, rel, index, e.metric_name, e.pmu, expr,
                                          e.metric_threshold, groups, e.unit, e.event_grouping,
                                          no_group, e.default_metricgroup_name, e.compat,
                                          e.aggr_mode, e.desc, e.long_desc]) + '\n')


if __name__ == '__main__':
    main()
