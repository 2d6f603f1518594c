"""Ordinary English as a person speaks it to a coding assistant: the words that say nothing about
which identifier is meant (``identifiers`` matches a name made only of these words more strictly).

``FUNCTION_WORDS`` glue a sentence together ("the", "to", "his"): a spoken phrase containing one is
only taken for a name that has that word itself (``to_dict``). ``ORDINARY_WORDS`` are the everyday
vocabulary, coding's included ("file", "test", "user", "list"): a name made only of them is said in
plain sentences too. Inflected forms count as their base word, and a word run together from two
ordinary ones ("filesize", "readme", "setup") is ordinary too (``is_ordinary``). ``TECH_WORDS`` are
programming's generic terms ("json", "markdown", "socket"): a name that is one of them alone is said
of anything, not of that name.
"""

from __future__ import annotations

from functools import lru_cache


def words_of(text: str) -> list[str]:
    """The words of a list written as text, one space or line break apart."""
    return text.split()


FUNCTION_WORDS = frozenset(
    words_of("""
    a an the this that these those there here his her hers him its it itself their theirs them they
    my mine your yours our ours we us you i me he she who whom whose which what when where why how
    and or but nor so yet if then than as because while though although unless until since
    to of in on at by for with from into onto upon about above below over under between among through
    during before after against without within along across behind beyond toward towards via per
    is are was were be been being am do does did done doing have has had having
    will would shall should can could may might must ought
    not no yes all any some each every both either neither few more most much many such own same
    just also only very too quite really please thanks okay ok um uh hmm oh well
    one ones something anything nothing everything someone anyone everyone
    let lets im youre were theyre its dont doesnt didnt cant wont isnt arent thats whats theres
    """)
)

ORDINARY_WORDS = (
    FUNCTION_WORDS
    | frozenset(
        words_of("""
    about above accept access account act action active actual add address after again age ago agree
    ahead air alive allow almost alone already alright always amount and angle animal another answer
    apart app append apply area argument arm around arrive art article ask attach attempt attribute
    auto available avoid away back background bad bag ball bank bar base basic be bear beat beautiful
    become bed begin behavior believe best better big bill bind bit black block blue board body book
    boolean border born bottom box boy brain branch break bring broken brother brown buffer bug build
    building business busy button buy bye byte call called calls camera cancel capital car card care
    carry case cash catch cause cell center certain chain chair chance change channel character charge
    chart check child children choice choose circle city class clean clear click client clock close
    closed code cold collect color column come comment common company compare complete condition config
    connect connection contact contain content context continue control convert copy core correct cost
    count country couple course cover create credit cross current cut daily dark data date day dead deal
    dear debug decide default define delay delete describe design detail develop device dialog dict
    die difference different direct directory disable display document dog door double down draft draw
    dream drive drop dry due dump during each early earth easy eat edge edit effect eight either element
    else empty enable end engine enough enter entire entry environment equal error even evening event
    ever every exact example except exist exit expect explain express extra eye face fact fail failed
    fair fall false family far fast father fear feature feel few field figure file fill filter final
    find fine finish fire first fish fit five fix flag floor flow fly focus follow food foot force
    form format forward found four frame free friend front full function future game garden gate
    general get girl give glass go god gold good great green ground group grow guess gun guy hair half
    hand handle handler hang happen happy hard hash head header health hear heart heat heavy hello help
    hidden hide high hill history hit hold hole home hook hope horse hot hour house huge human hundred
    idea image important include increase index info information inner input insert inside instance
    instead int integer interest internal into issue item job join jump keep key kid kill kind king
    know label lady land language large last late later law lay layer lead learn least leave left leg
    length less letter level library life lift light like limit line link list listen little live load
    local lock log long look loop lose loss lost lot love low machine main make man manage manager many
    map mark market match matter maybe mean measure meet member memory menu message method middle might
    mind minute miss mode model moment money month more morning mother mount mouse move movie much music
    name nation natural near need network never new news next nice night nine node none normal north
    note nothing notice now null number object off offer office often old once one online open
    operation option order other out outer output outside over owner page pain paint pair panel paper
    parent park part party pass past patch path pay people perfect perhaps period person phone pick
    picture piece place plan play player point policy pool poor position possible post power prefix
    present press pretty price print private problem process product program project property provide
    public pull push put question queue quick quiet quite race rain raise range rate rather raw reach
    read ready real reason receive record red reference region release remember remote remove render
    repeat replace reply report request require reset resource rest result return review rich right
    ring rise river road rock role room root round row rule run safe same save say scale school score
    screen search second section see seem select self sell send sense sentence separate service session
    set setting seven several shape share short should show side sign simple since single sister sit
    site six size skip sleep slow small smile social soft some son song soon sort sound source south
    space speak special speed spend split spring square stack staff stage stand standard star start
    state statement status stay step still stop store story straight strange street string strong
    student study style subject success such suffix summer sun support suppose sure surface switch
    system table tag take talk target task team tell template ten term test text than thank thing
    think third though thought three through throw ticket time title today together token tomorrow
    tonight too tool top total touch town track trade train tree trigger trip true truth try turn two
    type under understand unit until up update upon upper usage use used user usual valid validate
    value version very view visit voice wait walk wall want war warning watch water way weak wear
    week weight welcome west white whole wide wife win window winter wish woman wonder word work
    worker world worry wrap write wrong yard year yellow yesterday young zero
    exception traceback breakpoint debugger linter compiler runtime dependency
    """)
    )
    | frozenset(
        words_of("""
    ability able absolute abstract academic accident according achieve acquire actually adapt addition
    additional adjust admin administration admit adult advance advantage advice affect afford afraid
    afternoon agency agent aid aim alarm album alert align allocate alternative amazing analysis analyze
    ancient anger announce annual anybody anymore anyway anywhere apparent appeal appear apple approach
    approve approximately arrange array arrival assert assign assist assume attack attend attention
    audience author authority automatic average award aware awful baby balance band banner barely battle
    beach bean beginning behalf belong beneath benefit beside besides bet bike billion bird birth bite
    blank blind blood blow bold bone bonus boot boss bother bound bowl brand brave bread breakfast
    breath bridge brief bright brilliant broad brush budget builder bunch burn bus bush cable cake
    calculate calendar calm camp campaign candidate cap capacity captain capture career careful carpet
    cat category ceiling celebrate central century ceremony chairman challenge champion chapter chat
    cheap cheese chicken chief chip chocolate chunk church cinema citizen civil claim classic clever
    climate climb clip closet cloud club coach coast coat coffee coin collapse colleague collection
    college combine comfort command commercial commit committee communicate community compact comparison
    compete competition compile complain complex component compose compute computer concept concern
    conclude concrete conduct conference confidence confirm conflict confuse congress consider
    consistent console constant construct consume contract contribute conversation convince cook cool
    cooperate cope corner council counter county courage court cousin crash crazy cream creative crime
    crisis critical crowd crucial cry culture cup curious currency custom customer cycle damage dance
    danger dare database deadline death debate debt decade decent decision declare decline decode
    decrease deep defeat defend definitely degree deliver demand demo democracy deny department depend
    deploy depth deputy derive desert deserve desk despite destroy detect determine dictionary diet
    digital dinner direction director dirty disappear discover discuss disease dish dismiss distance
    distinct divide division doctor dollar domain dominate doubt downtown dozen dramatic dress drink
    driver duck duty eager ear earn ease east economic economy edition editor educate effective
    efficient effort elect election electric elsewhere emergency emotion emphasis employ employee encode
    encourage enemy energy enjoy ensure entertain enthusiasm episode equipment escape especially
    essential establish estate estimate evaluate evidence evil evolve examine excellent exchange excite
    exciting exclude excuse execute exercise expand expense expensive experience experiment expert
    export expose extend extent external extract facility factor factory faculty faith familiar famous
    fan fancy fashion fault favorite feed fellow female fence festival fetch fiction fight finance
    finger firm fitness flat flight float fold folder folk font football foreign forest forever forget
    forgive formal former fortune forum frequent fresh fridge frozen fruit fuel fun fund funny gallery
    gap gas gather gear gender generate generation generator generous gentle genuine gift glad global
    goal golf govern government grab grade grain grand grant grass grateful grave gray greet grey
    guarantee guard guest guide guitar habit hall handsome handy hardly harm hat hate heading hell
    helper helpful hero highlight highly hire historic holiday holy honest honor horrible hospital host
    hotel household housing however hunt hurry hurt husband ice identify identity ignore ill illegal
    illustrate imagine immediate impact implement implication imply import impose impress improve
    incident income indeed independent indicate individual industry infant inform initial injury
    innocent inquiry insight insist inspect install instruction insurance intend intense interface
    interview introduce invest invite involve iron island isolate joint joke journal journey judge juice
    junior jury justice justify keen kick kitchen knee knife knock lab lack lake lap largely laugh
    launch lawyer lazy leader league lean lecture legal lend lesson liberal licence license lie
    lifestyle lightly likely limited liquid literally literature loan locate location logging logic
    lonely loose lord loud lovely lucky lunch magazine mail maintain major majority male mall manner
    manual margin markup marriage mass massive master material math meal meaning meanwhile media medical
    medium meeting membership mental mention mentor merge mess metal mild military milk million minister
    minor mirror mission mistake mix mobile modern modify monitor mood moon moral motion motor mountain
    mouth multiple murder muscle museum mystery narrow native navy nearby nearly neat necessary neck
    negative neighbor nerve nervous net neutral nobody noise nose novel nurse obvious occasion occur
    ocean odd offense officer official oil opening operate opinion opponent opportunity oppose opposite
    orange ordinary organize origin original otherwise outcome overall pace pack package palace pan
    parallel parameter parse parser partner passenger passion password patient pattern pause peace peak
    pen penalty pension percent perform permanent permission permit personal perspective phase
    philosophy photo phrase physical piano pile pilot pin pink pipe pitch plain planet plant plate
    platform pleasant pleasure plenty plot plus pocket poem poet poetry police polite political politics
    poll pop popular population port portion positive pot potato potential pound pour practice pray
    predict prefer pregnant prepare presence preserve president pressure prevent previous pride priest
    primary prime prince principle prior priority prison prize probably procedure processor produce
    profession professional profile profit progress promise promote prompt proof proper proposal propose
    prospect protect protest proud prove provider proxy psychology pub publish punch purchase pure
    purpose pursue puzzle qualify quality quarter queen quote radio rail random rank rapid rare rarely
    rating react reaction reader realize recall recent recently recipe recognize recommend recover
    reduce reflect reform refuse regard register regular reject relate relation relationship relative
    relax relevant relief religion rely remain remark remind rent repair represent republic reputation
    rescue research reserve resident resolve respect respond response responsible restaurant restore
    retain retire retry reveal revenue reverse reward rice rid ride ridiculous risk rival roll romantic
    roof rope rough route routes routine royal rub rubbish rude ruin rural rush sad safety sail salary
    sale salt sample sand satisfy sauce scared scene schedule scheme science scratch script sea seat
    secret secretary sector secure security seed seek segment seldom senior sensitive sequence series
    serious servant serve settle setup severe sex shadow shake shame sharp sheet shell shift shine ship
    shirt shock shoe shoot shop shot shoulder shout shut shy sick sight signal significant silent silly
    silver similar sin sing sink skill skin sky slide slight slightly slip smart smell smoke smooth snow
    soap society sock soldier solid solution solve somebody somehow somewhat somewhere sorry soul soup
    spare spark specific spell spirit spot spread stable stadium stair stake stamp steal steel stick
    stock stomach stone storm strategy stream strength stress stretch strict strike strip stroke
    structure struggle stuff stupid submit succeed sudden suffer sugar suggest suit summary super supply
    surprise surround survey survive suspect sweet swim symbol sympathy tackle tail tale tall tank tap
    tape taste tax tea teach teacher tear technical technique technology teenager telephone television
    temperature temporary tend tension terminal terrible territory terror theater theme theory therefore
    thick thin thread threat threshold throat thus tide tidy tie tight timeout tip tire tired tissue toe
    tone tongue tooth topic tough tour tournament towel tower toy trace tradition traffic tragedy
    transfer transform transition translate transport trap travel treat treatment trend trial trick trim
    trouble truck trust tube tune tunnel twice twin typical ugly ultimate unable uncle union unique
    universe university unknown unlike unlikely upset urban urge urgent useful useless vacation valley
    variable variety various vast vehicle venture versus vertical veteran victim victory video village
    violence virtual visible vision visual vital volume vote wage waste wave wealth weapon weather web
    wedding weekend weird whatever wheel whenever wherever whether whisper wild willing wind wine wing
    wire wise witness wooden wool worth worthy wound wrapper writer yell yield zone
    """)
    )
)


TECH_WORDS = frozenset(
    words_of("""
    json http https url uri api html css xml sql yaml toml csv utf ascii unicode regex async sync await auth
    oauth jwt db ui cli gui dict str int bool float args kwargs init config env repo git python javascript
    typescript markdown lambda docker aws tcp udp ssl tls dns ip uuid cache proxy socket sockets server
    backend frontend endpoint middleware schema query mock enum tuple array bytes hex sha md5 iter
    """)
)


_PARTICLES = frozenset({"up", "me", "in", "on", "off", "out", "down", "back", "over", "away"})  # setup, readme
_SUFFIXES = frozenset({"able", "ible", "less", "ment", "ness", "ship", "let", "ful", "ward", "wards", "ish", "ism"})


@lru_cache(maxsize=16384)
def is_ordinary(word: str) -> bool:
    """Whether a lower-case word is ordinary: itself, the word it inflects (tests, files, closed,
    running) or two ordinary words run together (filesize, setup, readme; not trip + let, render + able)."""
    return _is_listed(word) or any(
        _is_part(word[:cut]) and (_is_part(word[cut:]) or word[cut:] in _PARTICLES) and word[cut:] not in _SUFFIXES
        for cut in range(3, len(word) - 1)
    )


def _is_part(word: str) -> bool:
    return len(word) >= 3 and word not in FUNCTION_WORDS and _is_listed(word)


def _is_listed(word: str) -> bool:
    if word in ORDINARY_WORDS:
        return True
    stems = []
    if word.endswith("s") and len(word) > 3:
        stems += [word[:-1], word[:-2] if word.endswith("es") else word[:-1]]
        if word.endswith("ies"):
            stems.append(word[:-3] + "y")
    if word.endswith("ed") and len(word) > 4:
        stems += [word[:-2], word[:-1], word[:-3] if word[-3] == word[-4] else word[:-2]]
    if word.endswith("ing") and len(word) > 5:
        stems += [word[:-3], word[:-3] + "e", word[:-4] if word[-4] == word[-5] else word[:-3]]
    if word.endswith("er") and len(word) > 4:
        stems += [word[:-2], word[:-1]]
    return any(stem in ORDINARY_WORDS for stem in stems)
