#!/usr/bin/env python3
# The grammars below are data: a template is one sentence per line, a vocabulary one string.
# ruff: noqa: E501, SIM905
"""Write the example data of examples/: generated text, dedicated to the public domain (CC0).

    python3 scripts/make_examples.py            # rewrites examples/ in place
    python3 scripts/make_examples.py --out DIR  # writes the same files into DIR

Every sentence comes from the grammars below (sentence templates and vocabularies written for
this script, in Chinese and English); nothing is copied from any corpus. The output depends only
on SEED and this file: two runs write the same bytes (the SQLite file too, with the same SQLite
library; tests/test_examples.py checks both).

Files:
  zh_news.jsonl, en_news.jsonl        {"id", "text"} per line, shuffled: originals, their
                                      near-duplicate copies (light and medium edits), heavy
                                      rewrites (related, not near-duplicates) and unique documents
  zh_news.gold.jsonl, en_news.gold.jsonl
                                      {"id", "cluster", "level", "topic"} per record, as
                                      `neardup eval GOLD PREDICTIONS` reads it (level: original,
                                      light, medium, heavy or unique; heavy records also carry
                                      "derived_from")
  complaints.db                       SQLite, table complaints: customer complaints with duplicate
                                      rows (typos, missing fields, reformatted phones and dates);
                                      its column `cluster` is the gold group (the group's smallest id)
  complaints.gold.jsonl               {"id", "cluster"} per row of complaints, for `neardup eval`
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

SEED = 20261128
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NEWS_ORIGINALS = 80  # documents that get near-duplicate copies
NEWS_HEAVY = 24  # heavy rewrites of originals (related, not near-duplicates)
NEWS_UNIQUE = 300  # documents without copies
COMPLAINT_PEOPLE = 900  # distinct complaints before copies are added

# -- a small template grammar ----------------------------------------------------------------------
# "{slot}" draws from the vocabulary of that name (a callable or a list), "[a|b|c]" picks one
# alternative, "{n:LO-HI}" is an integer in [LO, HI].
_SLOT = re.compile(r"\{([a-z_]+)(?::(-?\d+)-(-?\d+))?\}")
_CHOICE = re.compile(r"\[([^\[\]]*)\]")

Vocabulary = dict[str, Callable[[random.Random], str]]


def expand(template: str, vocabulary: Vocabulary, rng: random.Random) -> str:
    """One sentence from a template: the inner alternatives first, then the slots."""
    text = template
    while True:
        match = _CHOICE.search(text)
        if match is None:
            break
        text = text[: match.start()] + rng.choice(match.group(1).split("|")) + text[match.end() :]

    def slot(match: re.Match[str]) -> str:
        name, low, high = match.group(1), match.group(2), match.group(3)
        if name == "n":
            return str(rng.randint(int(low), int(high)))
        return vocabulary[name](rng)

    return _SLOT.sub(slot, text)


def pick(words: Sequence[str]) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(words)


def joined(*parts: Sequence[str], sep: str = "") -> Callable[[random.Random], str]:
    return lambda rng: sep.join(rng.choice(part) for part in parts)


# -- Chinese ---------------------------------------------------------------------------------------
ZH_SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏魏吕丁沈任姚卢"
)
ZH_GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍红鹏辉建国立新春海波宁雪梅晨阳浩然思远嘉欣子涵雨桐文博佳琪"
ZH_CITIES = (
    "杭州 成都 兰州 厦门 桂林 洛阳 大连 昆明 南昌 合肥 西宁 银川 贵阳 太原 济南 福州 南宁 长沙 "
    "武汉 郑州 石家庄 呼和浩特 乌鲁木齐 哈尔滨 长春 沈阳 青岛 宁波 温州 苏州 无锡 扬州 绍兴 泉州 "
    "珠海 汕头 湛江 柳州 遵义 大理 丽江 宜昌 襄阳 岳阳 常德 赣州 九江 芜湖 蚌埠 烟台 潍坊 淄博 "
    "保定 唐山 秦皇岛 包头 鄂尔多斯 榆林 宝鸡 天水 酒泉 喀什 伊宁 延吉 牡丹江 齐齐哈尔"
).split()
ZH_PLACE_HEADS = "东西南北上下新老大小清青白金石长红桃柳杏松竹梅兰云凤龙虎鹤鹿马牛羊"
ZH_PLACE_MIDS = "山水河湖溪泉林田沟坝岭湾港桥塘坪岗洲"
ZH_PLACE_TAILS = ["镇", "乡", "村", "街道", "社区", "开发区", "新区"]
ZH_ORG_HEADS = (
    "华信 恒通 远航 启明 晨光 瑞丰 安泰 长青 宏达 联创 嘉禾 永安 金桥 天成 博远 鼎盛 汇智 润泽 "
    "星海 云帆 立德 和鸣 春雨 青禾 盛世 同心 致远 明德 锦程 新源 百川 宜家 东方 北辰 南山 西岭"
).split()
ZH_ORG_KINDS = (
    "科技公司 农业合作社 人民医院 实验中学 研究所 图书馆 物流公司 食品厂 机械厂 纺织厂 旅游公司 "
    "建筑公司 电力公司 软件公司 养殖场 茶叶合作社 职业学院 文化馆 体育中心 水务集团"
).split()
ZH_CROPS = (
    "小麦 水稻 玉米 大豆 油菜 马铃薯 茶叶 柑橘 苹果 葡萄 红枣 核桃 棉花 甘蔗 蔬菜 食用菌 中药材 花生".split()
)
ZH_SPORTS = "篮球 足球 排球 乒乓球 羽毛球 游泳 田径 马拉松 围棋 象棋 自行车 龙舟 滑雪 射箭 举重 网球".split()
ZH_TEAMS_TAIL = ["队", "代表队", "俱乐部", "青年队"]
ZH_GOODS = (
    "新能源汽车 家用电器 智能手机 光伏组件 钢材 水泥 服装 鞋帽 家具 纸张 陶瓷 药品 化肥 "
    "电动自行车 工业机器人 锂电池 乳制品 冷冻食品 玩具 灯具"
).split()
ZH_TECH = (
    "无人机 卫星遥感 人工智能 大数据平台 物联网 云计算 芯片 传感器 三维打印 新材料 储能电池 "
    "自动驾驶 语音识别 基因检测 北斗导航 机器视觉"
).split()
ZH_CULTURE = (
    "书法 剪纸 京剧 越剧 黄梅戏 皮影戏 民歌 油画 国画 刺绣 陶艺 木雕 灯会 庙会 话剧 舞蹈 摄影 古籍".split()
)
ZH_WEATHER = "暴雨 大雪 寒潮 大风 冰雹 高温 雷电 大雾 沙尘 霜冻 台风 干旱".split()
ZH_ROADS = "高速公路 国道 地铁 城际铁路 公交线路 跨江大桥 隧道 机场航站楼 货运码头 停车场 绿道 客运站".split()
ZH_SUBJECTS = "数学 语文 英语 物理 化学 生物 地理 历史 美术 音乐 信息技术 劳动".split()
ZH_ILLNESS = "流感 高血压 糖尿病 近视 龋齿 颈椎病 过敏性鼻炎 骨质疏松 贫血 失眠".split()
ZH_MONTHS = [f"{m}月" for m in range(1, 13)]
ZH_ROLES = "局长 主任 校长 院长 经理 站长 村支书 馆长 教练 工程师 研究员 队长 会长 董事长".split()

ZH_VOCABULARY: Vocabulary = {
    "person": lambda rng: rng.choice(ZH_SURNAMES) + "".join(rng.choices(ZH_GIVEN, k=rng.choice((1, 2)))),
    "city": pick(ZH_CITIES),
    "place": joined(ZH_PLACE_HEADS, ZH_PLACE_MIDS, ZH_PLACE_TAILS),
    "org": joined(ZH_ORG_HEADS, ZH_ORG_KINDS),
    "crop": pick(ZH_CROPS),
    "sport": pick(ZH_SPORTS),
    "team": lambda rng: rng.choice(ZH_CITIES) + rng.choice(ZH_ORG_HEADS) + rng.choice(ZH_TEAMS_TAIL),
    "goods": pick(ZH_GOODS),
    "tech": pick(ZH_TECH),
    "art": pick(ZH_CULTURE),
    "weather": pick(ZH_WEATHER),
    "road": pick(ZH_ROADS),
    "subject": pick(ZH_SUBJECTS),
    "illness": pick(ZH_ILLNESS),
    "month": pick(ZH_MONTHS),
    "day": lambda rng: f"{rng.randint(1, 28)}日",
    "role": pick(ZH_ROLES),
}

ZH_TOPICS: dict[str, list[str]] = {
    "农业": [
        "{month}{day}，{city}{place}的{n:200-9000}亩{crop}[开始收割|进入灌浆期|完成播种|迎来丰收]，"
        "[当地农民|种植大户{person}|合作社社员]说今年的[长势|收成|品质]比去年[好|强|稳]。",
        "{org}[引进|推广|试种]了{n:3-40}个{crop}新品种，[平均|最高]亩产达到{n:300-1800}公斤。",
        "{place}的{person}带领{n:12-260}户村民种植{crop}，[每户|人均]年增收{n:2000-38000}元。",
        "[为了|为]应对{weather}，{city}农业部门[组织|派出]{n:10-90}名技术人员到{place}[指导|帮助]农户[抢收|加固大棚|排水防涝]。",
        "{org}建成了{n:2-30}座[冷库|烘干房|加工车间]，{crop}的[损耗|运输成本]下降了{n:5-40}%。",
        "[在|据]{city}[农产品|蔬菜|水果]批发市场，{crop}每公斤[售价|收购价]为{n:2-30}元，[较上月|比去年同期][上涨|下降]{n:1-25}%。",
        "{role}{person}[介绍|透露]，{place}今年[新建|改造|修缮]高标准农田{n:800-26000}亩，[灌溉|排灌]条件明显改善。",
        "[通过|依托]电商平台，{place}的{crop}[卖到|销往]了{n:5-31}个省份，[网店|直播间]月销量超过{n:1000-90000}单。",
    ],
    "经济": [
        "{city}{month}[外贸|进出口]总额达到{n:12-980}亿元，其中{goods}出口[增长|下降]{n:2-48}%。",
        "{org}[投资|追加投资]{n:1-60}亿元[建设|扩建]{goods}生产线，[预计|计划]明年{month}投产。",
        "[据|根据]{city}统计部门[发布|公布]的数据，前{n:2-11}个月全市[社会消费品零售总额|工业增加值|固定资产投资]同比增长{n:2-15}.{n:1-9}%。",
        "{role}{person}表示，{org}[今年|上半年]{goods}[订单|销量]已排到{month}，[工人|生产线]实行[两班倒|三班倒]。",
        "{city}[新设立|新登记]市场主体{n:300-9000}户，[个体工商户|小微企业]占了{n:40-95}%。",
        "[受|因]原材料价格[波动|上涨]影响，{goods}[出厂价|零售价][上调|下调]了{n:1-20}%，[部分|不少]经销商[开始|暂缓]备货。",
        "{place}的{org}[吸纳|带动]{n:50-3000}人就业，[员工|工人]月[平均|人均]工资{n:3000-12000}元。",
        "{city}[发放|推出]{n:1-50}千万元消费券，[覆盖|涉及]{goods}、餐饮和[文旅|家政|住宿]等领域。",
    ],
    "体育": [
        "{month}{day}晚，{team}在[主场|客场]以{n:1-5}比{n:0-4}[战胜|击败|负于|战平]{team}，[积分|排名][升至|降至]第{n:1-16}位。",
        "{city}{sport}[公开赛|锦标赛|联赛|邀请赛]{month}{day}[开幕|落幕]，[共有|吸引了]{n:80-3000}名[选手|运动员]参加。",
        "{n:14-38}岁的{person}在{sport}[比赛|决赛]中[夺得|获得][冠军|亚军|季军|第{n:4-8}名]，[打破|追平|刷新]了[个人|赛会]纪录。",
        "[主教练|教练]{person}[赛后|在发布会上]说，[球队|队员们][防守|进攻|体能]还有[提升|改进]空间。",
        "{org}[修建|开放]了{n:2-40}块{sport}场地，[周边|附近]居民[可以|能够][免费|低价]使用。",
        "{city}[全民健身|社区运动]月[活动|期间]，{n:1000-80000}人[参加|报名参加]了{sport}[比赛|体验活动]。",
        "[首日|次日|当天]{sport}[项目|比赛]中，{team}的{person}以{n:2-9}分{n:1-59}秒的成绩[领先|排名第一|位列第二]。",
        "{place}[少年|青少年]{sport}[训练营|培训班]招收了{n:20-400}名学员，[每周|每天][训练|上课]{n:2-6}次。",
    ],
    "天气": [
        "{city}气象台{month}{day}[发布|升级|解除]{weather}[黄色|橙色|蓝色|红色]预警，[预计|提醒]未来{n:2-7}天[局地|部分地区]有{weather}。",
        "[受|因]{weather}影响，{city}[航班|列车|高速公路][延误|停运|封闭]{n:2-160}[班|趟|处]，[有关部门|交通部门][启动|实施]应急预案。",
        "{place}[累计|最大]降水量达到{n:30-420}毫米，{n:20-900}名群众被[转移|安置]到[安全地带|附近学校]。",
        "[气象专家|首席预报员]{person}[分析|解释]，[今年|本轮]{weather}[来得早|持续时间长|强度大]，[与|和]{n:2-5}股冷暖气流交汇有关。",
        "{city}[最高|最低]气温达到{n:-18-42}摄氏度，[创下|接近]{n:10-60}年来同期[最高|最低]纪录。",
        "[为|为了][防范|抵御]{weather}，{org}[储备|调运]了{n:100-9000}[吨|件|箱][物资|融雪剂|沙袋|饮用水]。",
        "{place}[供电|供水|通信][线路|设施][受损|中断]{n:1-48}小时，[抢修|维修]人员{n:10-300}人[连夜|冒雨][作业|抢修]。",
    ],
    "科技": [
        "{org}[研发|推出|发布]的{tech}[系统|设备|平台][通过|完成]了[验收|测试|鉴定]，[精度|效率]提高了{n:10-90}%。",
        "{city}[首个|第一座]{tech}[产业园|创新中心|实验室]{month}{day}[揭牌|开园|投入使用]，[已有|首批]{n:5-120}家企业入驻。",
        "[工程师|研究员|团队负责人]{person}[介绍|说]，[这项|该项]{tech}技术[已|先后][申请|获得]专利{n:3-90}项。",
        "[借助|利用]{tech}，{place}的[巡检|监测|配送]时间从{n:3-12}小时缩短到{n:10-55}分钟。",
        "{org}与{org}[签订|签署]{tech}合作协议，[双方|两家单位]将[共建|联合建设]{n:2-10}个[研发中心|应用场景|示范项目]。",
        "[今年|去年]{city}{tech}[相关|上下游]企业营业收入[达到|超过]{n:10-900}亿元，[同比|比上年]增长{n:5-60}%。",
        "{place}中小学[开设|增加]了{tech}课程，{n:300-12000}名学生[参加|报名参加]了[兴趣小组|科普活动]。",
    ],
    "文化": [
        "{city}{art}[展览|展演|大赛]{month}{day}在{org}[开幕|举行]，[展出|集中展示]作品{n:60-900}件。",
        "{n:50-95}岁的{art}[传承人|艺人|老艺术家]{person}[收徒|授课]{n:3-60}年，[学生|徒弟]遍布{n:2-30}个省市。",
        "{place}[文化礼堂|农家书屋|乡村舞台][每月|每周]举办{art}[演出|讲座|培训]，[场场|每场]观众[超过|不少于]{n:80-800}人。",
        "{org}[修复|整理|数字化]了{n:100-9000}[件|册|幅]{art}[藏品|资料|作品]，[预计|计划]{month}[向公众开放|上线]。",
        "[春节|元宵|端午|中秋]期间，{city}[举办|推出]{art}[体验|展示]活动{n:10-300}场，[接待|吸引]游客{n:1-90}万人次。",
        "[馆长|负责人|策展人]{person}[说|介绍]，这次[展览|活动]的{art}[作品|节目]有{n:20-90}%来自[基层|普通群众|青年作者]。",
        "{place}的{art}[工作室|作坊|合作社][带动|吸纳]{n:10-400}名妇女[居家|灵活]就业，[年产值|年销售额]{n:30-3000}万元。",
    ],
    "交通": [
        "{city}[第{n:2-18}条|新建的]{road}{month}{day}[开工|通车|试运行]，[全长|总长]{n:3-180}公里。",
        "{road}[建成后|通车后]，{city}到{city}的[车程|行程]从{n:2-8}小时缩短到{n:30-110}分钟。",
        "{org}[新增|调整|开通]{n:2-40}条{road}，[日均|每天]客流[超过|达到]{n:2000-90000}人次。",
        "[交通部门|交警部门]{role}{person}[提醒|表示]，[节假日|周末]期间{road}[车流量|客流量]将[增加|增长]{n:10-80}%。",
        "{place}[改造|拓宽|修缮]了{n:2-60}公里[乡村道路|背街小巷|人行道]，[新增|安装][路灯|停车位|充电桩]{n:50-3000}个。",
        "[受|因]施工影响，{city}{road}[部分路段|{n:2-9}个出口][临时封闭|限速通行]，[预计|计划]持续到{month}。",
        "{city}[共享单车|公交车|出租车]{month}[日均|平均每天][骑行|运营|载客]{n:1-90}万[人次|次|车次]，[同比|较上月]增长{n:2-40}%。",
    ],
    "教育": [
        "{org}[今年|今秋][招收|录取]新生{n:200-6000}人，[开设|新增]{subject}等{n:3-40}个[专业|课程]。",
        "{city}[新建|改扩建]中小学{n:3-60}所，[新增|增加][学位|床位]{n:1000-60000}个，[缓解|解决]了[入学难|大班额]问题。",
        "{subject}[老师|教研员]{person}[说|介绍]，学校把{subject}[课堂|作业][搬到|延伸到]了{place}的[田间|工厂|博物馆]。",
        "{place}[中心小学|初级中学|幼儿园]的{n:60-2400}名[学生|孩子][吃上了|享受到][营养午餐|免费早餐|课后服务]。",
        "[据|根据]{city}教育部门[统计|介绍]，全市[义务教育|高中阶段]教师[平均|人均]年龄{n:30-45}岁，[硕士|研究生]学历占{n:5-40}%。",
        "{org}[组织|选派]{n:10-300}名[教师|志愿者]到{place}[支教|送教]，[每人|每期][服务|任教]{n:3-24}个月。",
        "{month}{day}，{city}{n:10000-90000}名考生[参加|走进]考场，[各考点|全市]启用了[身份核验|无线电监测]设备。",
    ],
    "卫生": [
        "{city}[卫生部门|疾控中心][提醒|建议]，[近期|入冬以来]{illness}[就诊人数|发病率][上升|增加]了{n:5-60}%。",
        "{org}[开设|新设]{illness}[专科门诊|专病门诊|筛查中心]，[每周|每月][接诊|筛查]{n:100-6000}人次。",
        "[医生|主任医师|专家]{person}[说|提醒]，{illness}[患者|人群]要[规律作息|合理膳食|按时复查]，[不要|切勿][自行停药|盲目进补]。",
        "{place}[卫生院|卫生室]{month}[完成|实现]了[远程会诊|家庭医生签约]{n:200-9000}人，[签约率|覆盖率]达到{n:40-98}%。",
        "{city}[组织|派出]{n:5-90}支[医疗队|义诊队]到{place}[义诊|巡诊]，[免费|低价][发放|提供]药品{n:100-5000}份。",
        "[今年|截至{month}]，{city}[为|给]{n:1-60}万名[老人|学生|居民][免费|优惠][体检|筛查]{illness}。",
    ],
}

ZH_GENERIC = [
    "[据|记者从]{city}[有关部门|相关部门][了解到|获悉]，[类似|同类][项目|活动]今年还将在{n:3-20}个[县区|乡镇]推广。",
    "[当地|{place}]居民{person}[说|告诉记者]：“[以前|过去]{n:2-10}年[一直|都]是这样，[现在|如今][方便|好]多了。”",
    "[下一步|今后]，{org}[将|还将][继续|进一步][完善|加强][服务|管理|保障]，[让|使][群众|居民][满意|受益]。",
    "{role}{person}[说|强调]，[要|必须]把[好事办好|实事办实]，[每一项|每一笔][资金|工作]都要[公开|经得起检验]。",
    "[截至|到]{month}{day}，[该项目|这项工作]已完成[总量|计划]的{n:20-99}%，[剩余|余下][部分|工程][预计|计划]{month}完成。",
    "[有|不少]网友[留言|评论]说，[希望|盼望]{city}[能|可以][多办|多开展][这样的|此类][活动|实事]。",
]

ZH_HEADERS = [
    "来源：{city}日报  责任编辑：{person}",
    "（本报记者 {person} 通讯员 {person}）",
    "【{city}讯】",
    "本文来自{org}官方网站",
]
ZH_FOOTERS = ["（完）", "（责任编辑：{person}）", "欢迎扫码关注我们。", "版权所有，转载请注明出处。"]

# -- English ---------------------------------------------------------------------------------------
EN_FIRST = (
    "Amara Bastian Celia Dorian Elena Felix Greta Hollis Imogen Jasper Kira Lionel Marisol Nolan Odette "
    "Pascal Quinn Rosalind Silas Tamsin Ulric Vera Wendell Xenia Yusuf Zelda Agnes Bruno Cora Desmond "
    "Esther Florian Gideon Hazel Ivo Juno Kasimir Lydia Magnus Nadia Otto Priya Rufus Sabine Tobias"
).split()
EN_LAST = (
    "Abernathy Blackwood Carrow Delacroix Ellery Fairbanks Galloway Hargreave Ingram Jessop Kellerman "
    "Lindqvist Marchetti Northcott Okafor Pendleton Quenneville Ravensworth Sandoval Thistlewood "
    "Underhill Vasquez Whitlock Yarrow Zimmerman Ashdown Brannigan Castellano Dunmore Esterhazy "
    "Fenwick Grimsby Holloway Ivanova Jankowski Kowalczyk Lockridge Montague Nakamura Oyelaran"
).split()
EN_TOWN_HEADS = (
    "Alder Birch Cedar Dunmore Elm Fern Glen Harrow Ivy Juniper Kestrel Larch Maple North Oak Pine "
    "Quarry Raven Stone Thorn Upper Willow Yew Ash Copper Silver Salt Mill Bright Clear"
).split()
EN_TOWN_TAILS = (
    "ford bridge haven field wick borough stead ton mouth vale brook water ridge moor cliff port".split()
)
EN_ORG_HEADS = (
    "Northgate Harbourline Silverleaf Redwater Blue Heron Kingsmead Greenhollow Ironbark Lakeshore "
    "Summit Meadowlark Brightside Foxglove Oldfield Westbrook Highmoor Riverbend Starling Tidewater Sunfield"
).split()
EN_ORG_KINDS = (
    "Cooperative, Logistics, Hospital, Academy, Robotics, Dairy, Textiles, Power, Water Trust, Library, "
    "Software, Seed Company, Museum, Transit Authority, Builders, Foods, Clinic, Rowing Club, Credit Union"
).split(", ")
EN_CROPS = "wheat barley oats rapeseed potatoes apples pears hops sugar beet onions carrots strawberries lentils".split()
EN_SPORTS = (
    "rugby football netball hockey cricket rowing cycling athletics swimming chess squash badminton".split()
)
EN_GOODS = (
    "steel coil,timber,wind turbine blades,heat pumps,bicycles,furniture,ceramics,paper,medical gloves,"
    "solar panels,machine tools,frozen fish,wool,cheese,batteries,glassware,fertiliser,electric buses"
).split(",")
EN_TECH = (
    "drone survey,battery storage,satellite imaging,machine translation,sensor network,3D printing,"
    "heat recovery,water filtering,crop robotics,tidal power,cloud archive,speech recognition"
).split(",")
EN_ARTS = (
    "folk music,watercolour,pottery,woodcarving,puppet theatre,poetry,photography,quilting,choral singing,"
    "street dance,stained glass,printmaking,opera,tapestry"
).split(",")
EN_WEATHER = (
    "gales,heavy rain,snow,hail,freezing fog,a heatwave,thunderstorms,flooding,drought,black ice".split(",")
)
EN_ROADS = (
    "bypass,ring road,tram line,rail link,footbridge,bus corridor,cycle path,ferry terminal,tunnel,"
    "park-and-ride,coastal road,freight yard"
).split(",")
EN_SUBJECTS = (
    "mathematics,chemistry,history,geography,music,art,computing,biology,languages,engineering".split(",")
)
EN_ILLNESS = (
    "influenza,measles,asthma,diabetes,hay fever,back pain,hearing loss,anaemia,insomnia,tooth decay".split(
        ","
    )
)
EN_MONTHS = "January February March April May June July August September October November December".split()
EN_WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
EN_ROLES = (
    "mayor,chief engineer,head teacher,council leader,harbour master,chief executive,head coach,curator,"
    "senior nurse,works manager,district officer,union secretary,farm manager,lead researcher"
).split(",")

EN_VOCABULARY: Vocabulary = {
    "person": joined(EN_FIRST, EN_LAST, sep=" "),
    "surname": pick(EN_LAST),
    "town": joined(EN_TOWN_HEADS, EN_TOWN_TAILS),
    "org": joined(EN_ORG_HEADS, EN_ORG_KINDS, sep=" "),
    "crop": pick(EN_CROPS),
    "sport": pick(EN_SPORTS),
    "team": lambda rng: (
        rng.choice(EN_TOWN_HEADS)
        + rng.choice(EN_TOWN_TAILS)
        + " "
        + rng.choice(["Rovers", "United", "Athletic", "Wanderers", "Harriers", "Falcons", "Otters", "Comets"])
    ),
    "goods": pick(EN_GOODS),
    "tech": pick(EN_TECH),
    "art": pick(EN_ARTS),
    "weather": pick(EN_WEATHER),
    "road": pick(EN_ROADS),
    "subject": pick(EN_SUBJECTS),
    "illness": pick(EN_ILLNESS),
    "month": pick(EN_MONTHS),
    "weekday": pick(EN_WEEKDAYS),
    "role": pick(EN_ROLES),
}

EN_TOPICS: dict[str, list[str]] = {
    "farming": [
        "Farmers around {town} began [harvesting|drilling|lifting] {crop} on {weekday}, [two weeks early|a week late|on schedule] after a [dry|wet|mild] {month}.",
        "{person}, who farms {n:40-900} hectares near {town}, said yields of {crop} were [up|down] {n:2-35} percent on last year.",
        "The {org} [bought|leased|shares] {n:2-30} [grain dryers|cold stores|combines] so that members no longer [queue|wait] at harvest.",
        "Prices paid for {crop} at the {town} market [rose|fell|held] at {n:90-640} crowns a tonne, [traders said|according to the auctioneer].",
        "[Drainage|Hedge planting|Soil testing] on {n:3-80} farms around {town} was paid for by the {org}, its {role} {person} said.",
        "[Young|New] growers at {town} [rent|share] {n:2-40} plots of {crop} and sell through a weekly [box scheme|farm shop|online market].",
        "{weather} in {month} cost growers in the {town} valley an estimated {n:2-90} thousand crowns in lost {crop}.",
    ],
    "business": [
        "The {org} will [invest|spend] {n:2-900} million crowns on a new {goods} [plant|line|warehouse] at {town}, [creating|securing] {n:20-1500} jobs.",
        "Exports of {goods} from {town} [rose|fell] {n:2-48} percent in {month}, [figures released on {weekday} showed|the port authority said].",
        "{person}, {role} of the {org}, said orders for {goods} were [booked|full] until {month} and the plant would [add a night shift|hire {n:10-200} more staff].",
        "[Higher|Lower] prices for [energy|raw materials|shipping] pushed the cost of {goods} [up|down] {n:1-25} percent, [retailers|wholesalers] in {town} said.",
        "{n:40-900} new businesses registered in {town} in the [first|second|third] quarter, most of them [cafes|repair shops|software firms|market stalls].",
        "The {org} reported [a profit|a loss|turnover] of {n:2-400} million crowns for the year and [raised|cut|kept] its dividend.",
        "[Shoppers|Visitors] spent {n:2-90} million crowns in {town} over the [holiday|festival|summer] weekend, [the chamber of trade|card data] showed.",
    ],
    "sport": [
        "{team} beat {team} {n:1-6}-{n:0-3} on {weekday} [night|afternoon] to [climb|move] to [second|fourth|sixth] in the table.",
        "{person}, {n:16-39}, won the {town} {sport} [open|championship|cup] in [record time|a tie-break|extra time], [ahead of|beating] {person}.",
        "[Coach|Captain] {person} said the squad had [worked on|struggled with] [defence|fitness|set pieces] all {month}.",
        "More than {n:200-9000} [runners|players|competitors] [entered|took part in] the {town} {sport} [festival|league|gala] this year.",
        "The {org} opened {n:2-12} new {sport} [pitches|courts|lanes] at {town}, free to [schools|juniors|residents] on {weekday} mornings.",
        "{team} [signed|released|loaned out] [striker|goalkeeper|winger|forward] {person} on a [one|two|three]-year [deal|contract].",
        "[Officials|Organisers] said the {sport} [final|semi-final|derby] would be [moved|replayed|postponed] because of {weather}.",
    ],
    "weather": [
        "Forecasters issued a [yellow|amber|red] warning for {weather} across {town} and the [coast|hills|valley] from {weekday} [night|morning].",
        "{weather} [closed|blocked|flooded] the {road} at {town} for {n:2-40} hours and [cut power to|stranded] {n:30-9000} [homes|drivers|passengers].",
        "[Rain gauges|Stations] near {town} recorded {n:20-300} millimetres in {n:6-72} hours, [the most|the wettest spell] since {n:1950-2019}.",
        "[Meteorologist|Forecaster] {person} said the {weather} came from [a slow-moving low|two colliding air masses|a stalled front] over the [sea|uplands].",
        "The temperature at {town} [reached|fell to] {n:-19-41} degrees on {weekday}, [a record for {month}|the lowest in {n:10-60} years].",
        "Crews from the {org} [cleared|gritted|pumped out] {n:10-600} [roads|cellars|culverts] overnight, its {role} {person} said.",
        "Schools in {town} [closed|opened late] on {weekday} and [buses|trains|ferries] ran [a reduced timetable|no service] because of {weather}.",
    ],
    "technology": [
        "The {org} [tested|launched|unveiled] a {tech} system at {town} that [cut|halved|reduced] inspection times by {n:10-90} percent.",
        "{person}, {role} at the {org}, said the {tech} project had [filed|been granted] {n:2-40} patents [since {month}|this year].",
        "A {tech} [centre|laboratory|start-up hub] opened in {town} on {weekday} with {n:3-60} companies [signed up|already resident].",
        "[Engineers|Students] in {town} [built|trained|programmed] a {tech} [prototype|model|rig] for {n:2-90} thousand crowns.",
        "The {org} and the {org} [signed|agreed] a {n:2-10}-year {tech} partnership worth {n:2-300} million crowns.",
        "{n:100-9000} [households|firms|farms] in {town} now use {tech}, [twice|three times] as many as in {month} last year.",
    ],
    "culture": [
        "An exhibition of {art} by {n:10-300} [local|young|amateur] [artists|makers] opens at the {org} in {town} on {weekday}.",
        "{person}, {n:50-96}, has taught {art} in {town} for {n:5-60} years and [still|now] [runs|leads] {n:2-9} classes a week.",
        "The {town} {art} festival [drew|attracted] {n:2-90} thousand visitors over {n:2-10} days, [organisers|the {org}] said.",
        "[Volunteers|Archivists] at the {org} have [restored|catalogued|digitised] {n:100-9000} {art} [pieces|records|works] since {month}.",
        "[Curator|Director] {person} said {n:20-90} percent of the {art} on show came from [people who had never exhibited|village groups|school pupils].",
        "A grant of {n:2-90} thousand crowns will keep the {town} {art} [society|workshop|company] going until {month}, [its chair|the council] confirmed.",
    ],
    "transport": [
        "Work on the {town} {road} [starts|finishes|resumes] in {month} and will [cost|save] {n:2-600} million crowns, the {org} said.",
        "The new {road} [cuts|will cut] the journey from {town} to {town} from {n:40-180} to {n:10-39} minutes.",
        "[Passenger numbers|Daily journeys] on the {town} {road} [reached|passed] {n:2000-90000} in {month}, up {n:2-60} percent.",
        "{person}, {role} of the {org}, warned drivers to expect [delays|diversions|lane closures] on the {road} [until {month}|every {weekday}].",
        "{town} added {n:10-900} [bike racks|charging points|bus shelters|crossings] this year and [widened|resurfaced] {n:2-60} kilometres of [pavement|lanes].",
        "Fares on the {town} {road} will [rise|fall|stay] [by {n:1-15} percent|at {n:1-9} crowns] from {month}, the operator said.",
    ],
    "schools": [
        "The {org} [will admit|admitted] {n:100-5000} [pupils|students] this year and [adds|opens] courses in {subject}.",
        "{town} will [build|extend|refurbish] {n:2-20} schools, [adding|creating] {n:200-9000} places by {month}, the council said.",
        "{subject} teacher {person} takes [her|his] classes to [farms|factories|the museum] in {town} every {weekday}.",
        "{n:40-2000} children at {town} [primary|middle] school now get [free breakfasts|after-school clubs|hot lunches], paid for by the {org}.",
        "Exam results in {subject} at {town} [rose|fell] {n:1-20} points, [head teacher|principal] {person} said on {weekday}.",
        "{n:5-300} [volunteers|retired teachers|students] from the {org} [tutor|mentor|coach] pupils in {subject} [twice a week|every evening|on weekends].",
    ],
    "health": [
        "Cases of {illness} in {town} [rose|fell] {n:5-70} percent in {month}, the [district health office|{org}] reported.",
        "The {org} opened a {illness} clinic at {town} that [sees|screens] {n:30-900} [patients|people] a week.",
        "Dr {person} [urged|advised] people with {illness} to [keep appointments|sleep regularly|stay active] and not to [stop medicines|self-diagnose] without advice.",
        "[Mobile|Pop-up] clinics visited {n:3-60} villages around {town} and [checked|treated|vaccinated] {n:200-9000} people for {illness}.",
        "{n:2-90} thousand [older residents|pupils|workers] in {town} will be offered free {illness} [checks|screening] [from|until] {month}.",
        "Waiting times at the {org} [fell|rose] to {n:2-30} weeks, [its|the] {role} {person} told the [council|health board] on {weekday}.",
    ],
}

EN_GENERIC = [
    "[A spokesperson for|The press office of] the {org} said similar schemes would [follow|be tried] in {n:2-20} [districts|towns] next year.",
    '"[It used to take|We used to wait] {n:2-10} [days|weeks] for this," said {person}, who lives in {town}. "[Now it is|It is now] much [easier|quicker]."',
    "The {org} [will publish|expects to publish] [a review|its findings|the figures] in {month}, {person} [added|said].",
    "[Residents|Readers|Businesses] can [comment on|object to|support] the plans at the {town} [library|town hall|website] until {month}.",
    "By the end of {month}, [the scheme|the work|the project] was {n:20-99} percent complete, [with|and] the rest [due|expected] by {month}.",
    "[Critics|Opponents|Some councillors] said the money would be better spent on [housing|roads|care homes|flood defences] in {town}.",
]

EN_HEADERS = [
    "{town}, {month} {n:1-28} (Valley Wire) -",
    "By {person}",
    "FROM OUR {town} DESK",
    "Posted by the {org}",
]
EN_FOOTERS = [
    "(Reporting by {person}; editing by {person})",
    "Copyright Valley Wire. All rights reserved.",
    "Sign up for our free newsletter.",
    "(Corrects spelling of {surname} in paragraph {n:2-5})",
]


# -- documents and their copies ----------------------------------------------------------------------
@dataclass(frozen=True)
class Language:
    code: str
    vocabulary: Vocabulary
    topics: dict[str, list[str]]
    generic: list[str]
    headers: list[str]
    footers: list[str]
    sentence_join: str  # between the sentences of a paragraph
    typo_pool: str  # characters a typo may put in


ZH = Language(
    "zh",
    ZH_VOCABULARY,
    ZH_TOPICS,
    ZH_GENERIC,
    ZH_HEADERS,
    ZH_FOOTERS,
    "",
    ZH_GIVEN
    + ZH_PLACE_MIDS
    + "的了在是有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经",
)
EN = Language(
    "en",
    EN_VOCABULARY,
    EN_TOPICS,
    EN_GENERIC,
    EN_HEADERS,
    EN_FOOTERS,
    " ",
    "abcdefghijklmnopqrstuvwxyz",
)


@dataclass
class Document:
    topic: str
    paragraphs: list[list[str]]  # sentences per paragraph
    header: str | None = None
    footer: str | None = None
    level: str = "unique"
    cluster: int = -1  # index of the original in the list of documents, -1 for itself
    derived_from: int | None = None
    typos: list[tuple[int, str]] = field(default_factory=list)  # (position, character) replacements
    spacing: int = 0  # 0: as written, 1..3: a whitespace/punctuation variant (see render)

    def sentences(self) -> list[str]:
        return [sentence for paragraph in self.paragraphs for sentence in paragraph]


def sentence(language: Language, topic: str, rng: random.Random) -> str:
    templates = language.generic if rng.random() < 0.15 else language.topics[topic]
    text = expand(rng.choice(templates), language.vocabulary, rng)
    return text[:1].upper() + text[1:]


def new_document(language: Language, rng: random.Random) -> Document:
    topic = rng.choice(sorted(language.topics))
    paragraphs = [
        [sentence(language, topic, rng) for _ in range(rng.randint(2, 3))] for _ in range(rng.randint(2, 4))
    ]
    return Document(topic, paragraphs)


def render(document: Document, language: Language) -> str:
    lines = []
    if document.header:
        lines.append(document.header)
    lines.extend(language.sentence_join.join(paragraph) for paragraph in document.paragraphs)
    if document.footer:
        lines.append(document.footer)
    text = "\n".join(lines)
    if document.spacing == 1:  # paragraphs run together
        text = text.replace("\n", " " if language.code == "en" else "")
    elif document.spacing == 2:  # blank lines and an indent
        text = "\n\n".join(("　　" if language.code == "zh" else "    ") + line for line in text.split("\n"))
    elif document.spacing == 3:  # the other punctuation width
        if language.code == "zh":
            text = text.translate(str.maketrans("，。：；！？“”", ',.:;!?""'))
        else:
            text = text.replace(". ", ".  ").replace(", ", " , ")
    characters = list(text)
    for position, character in document.typos:
        index = position % len(characters)
        if characters[index].isalnum():
            characters[index] = character
    return "".join(characters)


def light_copy(original: Document, language: Language, rng: random.Random, level: str = "light") -> Document:
    """The original reprinted: a header or footer, whitespace or punctuation, a typo or two,
    perhaps one sentence added or dropped."""
    copy = Document(original.topic, [list(paragraph) for paragraph in original.paragraphs], level=level)
    operations = rng.sample(["header", "footer", "spacing", "typos", "sentence"], k=rng.randint(2, 4))
    if "header" in operations:
        copy.header = expand(rng.choice(language.headers), language.vocabulary, rng)
    if "footer" in operations:
        copy.footer = expand(rng.choice(language.footers), language.vocabulary, rng)
    if "spacing" in operations:
        copy.spacing = rng.randint(1, 3)
    if "typos" in operations:
        copy.typos = [
            (rng.randrange(10_000), rng.choice(language.typo_pool)) for _ in range(rng.randint(1, 3))
        ]
    if "sentence" in operations:
        paragraph = rng.choice(copy.paragraphs)
        if len(paragraph) > 1 and rng.random() < 0.5:
            paragraph.pop(rng.randrange(len(paragraph)))
        else:
            paragraph.insert(rng.randint(0, len(paragraph)), sentence(language, copy.topic, rng))
    return copy


def rewritten(
    original: Document, language: Language, rng: random.Random, share: float, level: str
) -> Document:
    """The original with about `share` of its sentences replaced, dropped or inserted (other
    sentences of its topic) and its paragraphs perhaps reordered, then lightly edited."""
    copy = light_copy(original, language, rng, level)
    total = len(copy.sentences())
    for _ in range(max(1, round(share * total))):
        paragraph = rng.choice(copy.paragraphs)
        action = rng.choice(["replace", "drop", "insert"])
        if action == "drop" and len(paragraph) > 1:
            paragraph.pop(rng.randrange(len(paragraph)))
        elif action == "replace":
            paragraph[rng.randrange(len(paragraph))] = sentence(language, copy.topic, rng)
        else:
            paragraph.insert(rng.randint(0, len(paragraph)), sentence(language, copy.topic, rng))
    if rng.random() < 0.5:
        rng.shuffle(copy.paragraphs)
    return copy


def news(language: Language, rng: random.Random) -> tuple[list[str], list[str]]:
    """(data lines, gold lines) of one language's news file, in one shuffled order."""
    documents: list[Document] = []
    for _ in range(NEWS_ORIGINALS):
        original = new_document(language, rng)
        original.level = "original"
        position = len(documents)
        documents.append(original)
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
            if rng.random() < 0.55:
                copy = light_copy(original, language, rng)
            else:
                copy = rewritten(original, language, rng, rng.uniform(0.1, 0.2), "medium")
            copy.cluster = position
            documents.append(copy)
    for position in rng.sample(range(len(documents)), k=NEWS_HEAVY):
        while documents[position].level != "original":
            position = (position + 1) % len(documents)
        heavy = rewritten(documents[position], language, rng, rng.uniform(0.6, 0.8), "heavy")
        heavy.derived_from = position
        documents.append(heavy)
    documents.extend(new_document(language, rng) for _ in range(NEWS_UNIQUE))

    order = list(range(len(documents)))
    rng.shuffle(order)
    ids = {index: f"{language.code}-{rank + 1:04d}" for rank, index in enumerate(order)}
    data, gold = [], []
    for index in order:
        document = documents[index]
        data.append(dump({"id": ids[index], "text": render(document, language)}))
        label: dict[str, object] = {
            "id": ids[index],
            "cluster": ids[document.cluster if document.cluster >= 0 else index],
            "level": document.level,
            "topic": document.topic,
        }
        if document.derived_from is not None:
            label["derived_from"] = ids[document.derived_from]
        gold.append(dump(label))
    return data, gold


def dump(value: dict[str, object]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


# -- complaints: duplicate rows in a table -------------------------------------------------------
COMPLAINT_PRODUCTS = [
    "electricity bill",
    "broadband",
    "mobile contract",
    "home insurance",
    "car loan",
    "current account",
    "water supply",
    "parcel delivery",
    "gym membership",
    "train ticket refund",
    "heating repair",
    "credit card",
]
COMPLAINT_TEMPLATES = [
    "I was charged {n:12-480} crowns twice for my {product} in {month} and nobody has refunded it.",
    "My {product} has not worked since {weekday} {n:1-28} {month}; I called {n:2-9} times and was promised a technician.",
    "The {product} renewal went up by {n:5-60} percent without any letter, and I want the old price back.",
    "I cancelled my {product} on {n:1-28} {month} but I am still being billed every month.",
    "Staff at the {town} branch lost the documents I brought for my {product} and asked me to start again.",
    "The refund of {n:20-900} crowns for my {product} was approved in {month} but never arrived.",
    "I was told my {product} complaint would be answered within {n:2-10} days; it has been {n:3-12} weeks.",
    "A sales agent signed me up for a {product} I never asked for during a call on {weekday}.",
]
COMPLAINT_STREETS = (
    "High Street,Mill Lane,Station Road,Church Walk,Quay Side,Orchard Close,Market Row,Bridge End".split(",")
)
NICKNAMES = {
    "Elena": "Ellie",
    "Felix": "Fee",
    "Rosalind": "Ros",
    "Tobias": "Toby",
    "Magnus": "Mags",
    "Desmond": "Des",
    "Gideon": "Gid",
    "Imogen": "Immy",
    "Wendell": "Wen",
    "Kasimir": "Kas",
}


def typo(word: str, rng: random.Random) -> str:
    """One keyboard slip: a letter dropped, doubled, swapped with its neighbour or replaced."""
    if len(word) < 4:
        return word
    position = rng.randrange(1, len(word) - 1)
    action = rng.choice(["drop", "double", "swap", "replace"])
    if action == "drop":
        return word[:position] + word[position + 1 :]
    if action == "double":
        return word[:position] + word[position] + word[position:]
    if action == "swap":
        return word[:position] + word[position + 1] + word[position] + word[position + 2 :]
    return word[:position] + rng.choice("aeiourstnl") + word[position + 1 :]


def phone_formats(digits: str) -> list[str]:
    return [
        f"0{digits[:3]} {digits[3:6]} {digits[6:]}",
        f"0{digits[:3]}-{digits[3:6]}-{digits[6:]}",
        f"0{digits}",
        f"+44 {digits[:3]} {digits[3:6]} {digits[6:]}",
        f"(0{digits[:3]}) {digits[3:]}",
    ]


def date_formats(year: int, month: int, day: int) -> list[str]:
    return [
        f"{year:04d}-{month:02d}-{day:02d}",
        f"{day:02d}/{month:02d}/{year:04d}",
        f"{year:04d}/{month}/{day}",
        f"{day} {EN_MONTHS[month - 1]} {year}",
    ]


def complaints(rng: random.Random) -> list[dict[str, object]]:
    """Rows of the complaints table, shuffled, ids 1..n; `cluster` is the group's smallest id."""
    people: list[dict[str, object]] = []
    for _ in range(COMPLAINT_PEOPLE):
        first, last = rng.choice(EN_FIRST), rng.choice(EN_LAST)
        if people and rng.random() < 0.08:  # someone of an earlier complainant's household: not a duplicate
            last = str(people[-1]["last"])
        year, month, day = rng.choice((2024, 2025)), rng.randint(1, 12), rng.randint(1, 28)
        product = rng.choice(COMPLAINT_PRODUCTS)
        vocabulary = dict(EN_VOCABULARY, product=pick([product]))
        people.append(
            {
                "first": first,
                "last": last,
                "email": f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@{rng.choice(['mail', 'post', 'inbox', 'web'])}.example",
                "phone": "".join(str(rng.randint(0, 9)) for _ in range(10)),
                "date": (year, month, day),
                "street": f"{rng.randint(1, 240)} {rng.choice(COMPLAINT_STREETS)}",
                "town": rng.choice(EN_TOWN_HEADS) + rng.choice(EN_TOWN_TAILS),
                **(
                    {key: people[-1][key] for key in ("phone", "street", "town")}
                    if people and last == people[-1]["last"]
                    else {}
                ),
                "product": product,
                "text": expand(rng.choice(COMPLAINT_TEMPLATES), vocabulary, rng),
            }
        )

    def row(person: dict[str, object], first_row: bool) -> dict[str, object]:
        first, last = str(person["first"]), str(person["last"])
        phone, email, text = str(person["phone"]), str(person["email"]), str(person["text"])
        street = str(person["street"])
        year, month, day = cast(tuple[int, int, int], person["date"])
        date = date_formats(year, month, day)[0]
        if not first_row:  # a duplicate entered again by hand, or by another office
            changes = rng.sample(
                ["name", "phone", "date", "email", "street", "text", "case"], k=rng.randint(1, 4)
            )
            if "name" in changes:
                if first in NICKNAMES and rng.random() < 0.3:
                    first = NICKNAMES[first]
                elif rng.random() < 0.5:
                    first = typo(first, rng)
                else:
                    last = typo(last, rng)
            phone = rng.choice(phone_formats(phone)) if "phone" in changes else phone_formats(phone)[0]
            if "date" in changes:
                date = rng.choice(date_formats(year, month, day)[1:])
            if "email" in changes:
                email = email.upper() if rng.random() < 0.5 else typo(email, rng)
            if "text" in changes:
                text = (
                    text.replace(" and ", " & ").replace("crowns", "cr.") if rng.random() < 0.5 else text[:-1]
                )
            if "street" in changes:
                street = street.replace("Street", "St").replace("Road", "Rd").replace("Lane", "Ln")
                street = street if rng.random() < 0.5 else typo(street, rng)
            if "case" in changes:
                first, last = first.upper(), last.upper()
        else:
            phone = phone_formats(phone)[0]
        values: dict[str, object] = {
            "first_name": first,
            "last_name": last,
            "email": email,
            "phone": phone,
            "street": street,
            "town": person["town"],
            "received": date,
            "product": person["product"],
            "complaint": text,
        }
        if not first_row and rng.random() < 0.4:  # fields left empty the second time
            for name in rng.sample(["email", "phone", "street", "received", "town"], k=rng.randint(1, 2)):
                values[name] = None
        return values

    rows: list[tuple[int, dict[str, object]]] = []
    for number, person in enumerate(people):
        rows.append((number, row(person, True)))
        if rng.random() < 0.3:
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                rows.append((number, row(person, False)))
    rng.shuffle(rows)
    first_id: dict[int, int] = {}
    table = []
    for position, (person_number, values) in enumerate(rows, start=1):
        first_id.setdefault(person_number, position)
        table.append({"id": position, **values, "cluster": first_id[person_number]})
    return table


COMPLAINT_COLUMNS = [
    "id INTEGER PRIMARY KEY",
    "first_name TEXT",
    "last_name TEXT",
    "email TEXT",
    "phone TEXT",
    "street TEXT",
    "town TEXT",
    "received TEXT",
    "product TEXT",
    "complaint TEXT",
    "cluster INTEGER",
]


def write_database(path: Path, rows: list[dict[str, object]]) -> None:
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    try:
        connection.execute(f"CREATE TABLE complaints ({', '.join(COMPLAINT_COLUMNS)})")
        names = [column.split()[0] for column in COMPLAINT_COLUMNS]
        connection.executemany(
            f"INSERT INTO complaints ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [[row[name] for name in names] for row in rows],
        )
        connection.commit()
        connection.execute("VACUUM")
    finally:
        connection.close()


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8", newline="\n")


def write_examples(out: Path) -> list[Path]:
    """Write every example file into `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    written = []
    for language, name in ((ZH, "zh_news"), (EN, "en_news")):
        data, gold = news(language, rng)
        write_lines(out / f"{name}.jsonl", data)
        write_lines(out / f"{name}.gold.jsonl", gold)
        written += [out / f"{name}.jsonl", out / f"{name}.gold.jsonl"]
    rows = complaints(rng)
    write_database(out / "complaints.db", rows)
    write_lines(
        out / "complaints.gold.jsonl", [dump({"id": row["id"], "cluster": row["cluster"]}) for row in rows]
    )
    written += [out / "complaints.db", out / "complaints.gold.jsonl"]
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--out", type=Path, default=EXAMPLES, help="folder to write into (default: examples/)"
    )
    arguments = parser.parse_args(argv)
    for path in write_examples(arguments.out):
        print(f"{path}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
